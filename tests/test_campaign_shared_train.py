"""Two campaigns riding the train one of them started (issue 12, several rollouts per train).

The first campaign to reach a cluster with no train starts one that visits only its rollouts'
hosts. When it ends while another campaign still rides that train, it only takes its own
rollout off (stopping the train would strand the other); the last campaign to leave stops it.
Real dev server, real SQLite ``multi`` fleet at speed max.
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_handle, final_status, start_campaign
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.train.client import train_status
from tests.e2e import audit_ok
from tests.test_campaign_e2e import (
    multi_fleet,
    no_train_left,  # noqa: F401 (the autouse fixture)
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _canary(name: str, targets: dict[str, str], bake: str) -> CampaignSpec:
    return CampaignSpec.model_validate(
        {
            "name": name,
            "targets": targets,
            "stages": [{"name": "canary", "clusters": ["c01"], "hosts": 4, "bake": bake}],
            "train": {"domain_size": 2},
        }
    )


async def _running(client, workflow_id: str) -> bool:
    desc = await client.get_workflow_handle(workflow_id).describe()
    return desc.status == WorkflowExecutionStatus.RUNNING


async def test_the_last_campaign_to_leave_a_campaign_train_stops_it(
    dev_env, tmp_home, task_queue
) -> None:
    client = dev_env.client
    # An hour a second: the second campaign's 48 h bake outlasts the first campaign's end by
    # most of a minute of wall time, however loaded the machine.
    path = multi_fleet(tmp_home, speed=3600.0)
    first = _canary("os-first", {"os": "6.12.0-9"}, "0h")
    second = _canary("nic-second", {"nic_firmware": "28.41.1000"}, "48h")
    async with build_worker(client, path, task_queue):
        await start_campaign(client, first, task_queue=task_queue)
        for _ in range(300):  # the first campaign has started c01's train
            try:
                if (await train_status(client, "c01")).rollouts:
                    break
            except Exception:  # not there yet
                pass
            await asyncio.sleep(0.1)
        await start_campaign(client, second, task_queue=task_queue)
        for _ in range(300):  # both ride it
            riding = {r.campaign for r in (await train_status(client, "c01")).rollouts}
            if second.workflow_id in riding:
                break
            await asyncio.sleep(0.1)
        done = await asyncio.wait_for(final_status(campaign_handle(client, first.workflow_id)), 180)
        assert done.state == "succeeded", done.reason
        # The first campaign left (the second bakes 48 h more); the train goes on for it.
        assert await _running(client, second.workflow_id)
        assert await _running(client, "train-c01"), "the first campaign stopped a shared train"
        riding = [r.campaign for r in (await train_status(client, "c01")).rollouts]
        assert riding == [second.workflow_id], riding
        second_handle = campaign_handle(client, second.workflow_id)
        last = await asyncio.wait_for(final_status(second_handle), 240)
        assert last.state == "succeeded", last.reason
        for _ in range(300):
            if not await _running(client, "train-c01"):
                break
            await asyncio.sleep(0.1)
        assert not await _running(client, "train-c01"), "the last campaign left its train running"
    assert audit_ok(path)
