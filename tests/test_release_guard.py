"""A 0.2 worker refuses to start beside open workflows of an older release (exit 2, naming
them), on a real dev server: the older run is played by a worker whose identity names no
release, as 0.1's did; one started by this release's worker is no reason to refuse."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities import build_activities
from orchestrator.app.release_guard import is_this_series, older_open_runs
from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.constants import RELEASE
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from tests.train_helpers import spec
from workflows import WORKFLOWS
from workflows.cluster_train import ClusterTrain

REPO = Path(__file__).resolve().parent.parent


def test_release_is_the_distribution_version() -> None:
    """The release a worker names is pyproject.toml's version."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == RELEASE
    assert is_this_series(f"12@host trainctl/{RELEASE} fleet=ab12")
    assert not is_this_series("12@host fleet=ab12") and not is_this_series("12@host trainctl/0.1.0")


async def _first_task_done(handle: WorkflowHandle[Any, Any]) -> None:
    for _ in range(200):
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                return
        await asyncio.sleep(0.1)
    raise AssertionError("the train never ran a workflow task")


async def _start_train(env: Any, worker: Worker, task_queue: str) -> WorkflowHandle[Any, Any]:
    async with worker:
        handle = await env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec()),
            id=f"train-c00-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        await _first_task_done(handle)
    return handle


async def test_a_worker_refuses_to_start_beside_an_older_release(
    dev_env: Any, tmp_home: Path, task_queue: str
) -> None:
    """An open train an older worker ran: `trainctl worker` exits 2 naming it; once it is
    gone, and beside a train this release ran, the guard finds nothing."""
    path = tmp_home / "fleet.db"
    SqliteFleet.create(path, get_preset("small"), 1, MAX_SPEED).close()
    with ThreadPoolExecutor(max_workers=4) as pool:
        old = Worker(
            dev_env.client,
            task_queue=task_queue,
            identity="4242@old-host",  # 0.1's identity: no release in it
            workflows=WORKFLOWS,
            activities=build_activities(path, dev_env.client, task_queue),
            activity_executor=pool,
        )
        older = await _start_train(dev_env, old, task_queue)
    try:
        address = dev_env.client.service_client.config.target_host
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from orchestrator.app.cli import entrypoint; entrypoint()",
            *("worker", "--task-queue", task_queue, "--metrics-port", "0", "--json"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "TEMPORAL_ADDRESS": address},
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 2, (out, err[-2000:])
        assert older.id.encode() in out and b'"field": "worker"' in out, out
    finally:
        await older.terminate("test cleanup")
        with contextlib.suppress(RPCError):  # the arbiter its plan may have started
            arbiter = dev_env.client.get_workflow_handle(arbiter_workflow_id("c00", task_queue))
            await arbiter.terminate("test cleanup")
    assert await older_open_runs(dev_env.client, task_queue) == []
    newer = await _start_train(dev_env, build_worker(dev_env.client, path, task_queue), task_queue)
    try:
        assert await older_open_runs(dev_env.client, task_queue) == []
    finally:
        await newer.terminate("test cleanup")
        with contextlib.suppress(RPCError):
            arbiter = dev_env.client.get_workflow_handle(arbiter_workflow_id("c00", task_queue))
            await arbiter.terminate("test cleanup")
