"""A recurring campaign: ``trainctl campaign start --spec F --cron EXPR``, as a Temporal Schedule.

The schedule's id is the campaign's (``campaign-<name>``); each run is a ``Campaign`` workflow
whose id is that plus the instant it was due, with overlap SKIP (``orchestrator.infra.schedules``),
so
a weekly BMC refresh still rolling when the next week comes is skipped, never doubled. A run
finds what earlier runs did already done (hosts at the targets), and rolls what is new.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from orchestrator.campaign.client import WORKFLOW_NAME
from orchestrator.campaign.ui import campaign_summary
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import CampaignInput
from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN
from orchestrator.infra.schedules import ScheduleView, create_schedule

#: The memo kind of a campaign's schedule.
KIND = "campaign"


async def schedule_campaign(
    client: Client, spec: CampaignSpec, *, cron: str, task_queue: str
) -> ScheduleView:
    """Create the schedule that starts ``spec`` as a campaign at each instant of ``cron``."""
    return await create_schedule(
        client,
        spec.workflow_id,
        kind=KIND,
        workflow=WORKFLOW_NAME,
        arg=CampaignInput(spec=spec),
        task_queue=task_queue,
        cron=cron,
        summary=campaign_summary(spec),
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(TRAIN_CAMPAIGN, spec.workflow_id)]
        ),
        id_field="name",
        time_zone=spec.schedule.time_zone if spec.schedule else "UTC",
    )
