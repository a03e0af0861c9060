"""A recurring bulk operation: ``trainctl ops start --spec F --cron EXPR``, as a Temporal Schedule.

The schedule's id is the operation's (``ops-<request_id>``); each run is a ``BulkOperation``
with ``scheduled`` set, so it names itself by its own workflow id (the schedule's id plus the
instant it was due) and owns hosts and children apart from the other runs. Overlap SKIP (in
``orchestrator.infra.schedules``) keeps two runs from ever running side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from orchestrator.contracts.ops_spec import OperationSpec, operation_id
from orchestrator.contracts.ops_types import OperationInput
from orchestrator.contracts.search_attributes import TRAIN_CLUSTER
from orchestrator.infra.schedules import ScheduleView, create_schedule
from orchestrator.ops.client import WORKFLOW_NAME
from orchestrator.ops.ui import operation_summary

#: The memo kind of an operation's schedule.
KIND = "operation"


async def schedule_operation(
    client: Client, spec: OperationSpec, *, cron: str, clusters: Sequence[str], task_queue: str
) -> ScheduleView:
    """Create the schedule that starts ``spec`` as a new operation at each instant of ``cron``."""
    op_id = operation_id(spec)
    pairs = [SearchAttributePair(TRAIN_CLUSTER, clusters[0])] if len(clusters) == 1 else []
    return await create_schedule(
        client,
        op_id,
        kind=KIND,
        workflow=WORKFLOW_NAME,
        arg=OperationInput(spec=spec, scheduled=True),
        task_queue=task_queue,
        cron=cron,
        summary=operation_summary(spec.kind, spec.targets, spec.scope.cluster),
        search_attributes=TypedSearchAttributes(pairs),
        time_zone=spec.schedule.time_zone if spec.schedule else "UTC",
    )
