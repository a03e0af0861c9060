"""Each figure a command or page shows has one source, so the answers agree with each other.

Pure pages and answers where no workflow is needed; the real dev server and a worker where a
command's answer comes from one.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from orchestrator.app.worker import build_worker
from tests.test_ops_exec import trainctl
from tests.train_helpers import make_fleet


async def _end(env: Any, *ids: str) -> None:
    """Terminate what a test started that would outlive its worker."""
    for wid in ids:
        handle = env.client.get_workflow_handle(wid)
        with contextlib.suppress(RPCError):
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test ended")


@pytest.mark.asyncio(loop_scope="session")
async def test_campaign_start_json_says_where_it_stands(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    """``campaign start --json`` answers the campaign's status, never ``"status": null``."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = make_fleet(tmp_home, 3600.0)
    spec = tmp_home / "k.json"
    spec.write_text(
        json.dumps(
            {
                "name": "story",
                "targets": {"os": "6.8.0-50"},
                "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"}],
            }
        )
    )
    try:
        async with build_worker(dev_env.client, path, task_queue):
            args = ("campaign", "start", "--spec", str(spec), "--json", "--task-queue", task_queue)
            code, out, err = await trainctl(*args)
    finally:
        await _end(dev_env, "campaign-story", "train-c00")
    assert code == 0, err
    assert out["started"] is True and out["campaign_id"] == "campaign-story"
    assert out["status"] is not None, out
    assert out["status"]["state"] == "running" and out["status"]["targets"] == {"os": "6.8.0-50"}
