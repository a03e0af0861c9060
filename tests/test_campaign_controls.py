"""Steering a campaign on the real dev server: pause, resume and abort through the CLI, and a
long bake that continues as new without losing its place."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_handle, campaign_status, final_status
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import CampaignInput, CampaignStatus
from orchestrator.train.client import train_result
from tests.e2e import trainctl
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)

pytestmark = pytest.mark.asyncio(loop_scope="session")


def canary(name: str, bake: str) -> dict[str, Any]:
    return {
        "name": name,
        "targets": {"os": "6.12.0-9"},
        "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 2, "bake": bake}],
        "gates": {"max_failures": 1},
    }


async def until(client: Any, cid: str, want: str) -> CampaignStatus:
    """The campaign's status once its canary stage is ``want``."""
    status = None
    for _ in range(400):
        await asyncio.sleep(0.25)
        try:
            status = await campaign_status(client, cid)
        except LookupError:  # before its first workflow task
            continue
        if status.stages[0].state == want:
            return status
    raise AssertionError(f"stage never {want}: {status}")


async def test_pause_resume_abort_through_the_cli(dev_env, tmp_home, task_queue, monkeypatch):
    """Paused and resumed by id; aborted, the campaign ends aborted and stops the train it began."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home)
    spec_file = tmp_home / "c.json"
    spec_file.write_text(json.dumps(canary("steer", "5000h")))
    async with build_worker(dev_env.client, path, task_queue):
        code, out, err = await trainctl(
            "campaign", "start", "--spec", str(spec_file), "--task-queue", task_queue, "--json"
        )
        assert code == 0 and out["campaign_id"] == "campaign-steer", err
        await until(dev_env.client, "campaign-steer", "baking")
        code, out, _ = await trainctl("campaign", "pause", "--id", "steer", "--json")
        assert code == 0 and out["state"] == "paused"
        code, out, _ = await trainctl("campaign", "pause", "--id", "steer", "--json")
        assert code == 0 and out["state"] == "paused"  # already paused: done, nothing changes
        code, out, _ = await trainctl("campaign", "resume", "--spec", str(spec_file), "--json")
        assert code == 0 and out["state"] == "running"
        code, out, _ = await trainctl("campaign", "abort", "--id", "campaign-steer", "--json")
        assert code == 0
        final = await asyncio.wait_for(
            final_status(campaign_handle(dev_env.client, "campaign-steer")), 180
        )
        train = await asyncio.wait_for(train_result(dev_env.client, "c00"), 180)
        code, out, _ = await trainctl("campaign", "status", "--id", "steer", "--json")
        desc = await campaign_handle(dev_env.client, "campaign-steer").describe()
    assert final.state == "aborted"
    assert desc.status == WorkflowExecutionStatus.FAILED  # not a green COMPLETED (issue 25)
    assert train.state == "stopped" and train.in_maintenance == 0
    assert code == 0 and out["state"] == "aborted"
    for verb in ("status", "pause", "resume", "abort"):  # an id naming nothing: bad input
        code, out, _ = await trainctl("campaign", verb, "--id", "nope", "--json")
        assert code == 2 and out["field"] == "id", (verb, out)


async def test_long_bake_continues_as_new_and_finishes(dev_env, tmp_home, task_queue):
    """With a low history bound the campaign continues as new mid-bake and still succeeds."""
    path = multi_fleet(tmp_home)
    spec = CampaignSpec.model_validate(canary("long-bake", "60h"))
    # The lowest bound allowed, so the campaign continues as new during its bake.
    inp = CampaignInput(spec=spec, poll_seconds=0.1, max_history_events=50)
    async with build_worker(dev_env.client, path, task_queue):
        handle = await dev_env.client.start_workflow(
            "Campaign",
            inp,
            id=spec.workflow_id,
            task_queue=task_queue,
            result_type=CampaignStatus,
        )
        final = await asyncio.wait_for(handle.result(follow_runs=True), 240)
        desc = await campaign_handle(dev_env.client, spec.workflow_id).describe()
    assert final.state == "succeeded", final.reason
    assert final.stages[0].hosts_changed == 2
    assert desc.run_id != handle.first_execution_run_id  # it did continue as new
