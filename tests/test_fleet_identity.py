"""Every fleet has an id, and a command never steers another fleet's server (issue 25).

Two homes, each with its own fleet: the first's worker polls the default task queue of a real
dev server (its own, so the poller it leaves behind bothers no other test). A command from the
second home that reaches that server exits 2 naming ``address``; from the first home it goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.contracts.constants import TASK_QUEUE
from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.fleet.fleet_id import identity_fleet, read_fleet_id
from tests.train_helpers import make_fleet

REPO = Path(__file__).resolve().parent.parent
ENTRY = "from orchestrator.app.cli import entrypoint; entrypoint()"


def _cli(
    home: Path, address: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    env = {**os.environ, "TRAINCTL_HOME": str(home), "TEMPORAL_ADDRESS": address, **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.asyncio(loop_scope="session")
async def test_a_command_refuses_another_fleets_server(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    path = make_fleet(ours, 3600.0)
    make_fleet(theirs, 3600.0)
    mine, other = read_fleet_id(path), read_fleet_id(theirs / "fleet.db")
    assert mine and other and mine != other  # fleet init gives every fleet its own id
    env = await _own_server()
    try:
        address = env.client.service_client.config.target_host
        worker = build_worker(env.client, path, TASK_QUEUE)
        assert identity_fleet(_identity(worker)) == mine
        async with worker:
            await asyncio.sleep(1.0)  # the worker's first polls reach the server
            code, out = await asyncio.to_thread(
                _cli, theirs, address, "train", "status", "--cluster", "c00"
            )
            assert code == 2 and out["field"] == "address", out
            assert mine in str(out["error"]) and other in str(out["error"])
            code, out = await asyncio.to_thread(
                _cli, ours, address, "train", "status", "--cluster", "c00"
            )
            assert out.get("field") != "address", out  # ours: on to the train (none runs)
            code, status = await asyncio.to_thread(_cli, ours, address, "fleet", "status")
            assert code == 0 and status["fleet_id"] == mine
    finally:
        await env.shutdown()


@pytest.mark.asyncio(loop_scope="session")
async def test_fleets_sharing_a_server_on_queues_of_their_own_pass_each_others_check(
    tmp_path: Path,
) -> None:
    """Two fleets on one server, each with its workers on a task queue of its own: a command
    checks the workers of its fleet's queue (``--task-queue`` or ``TRAINCTL_TASK_QUEUE``), so
    neither fleet is refused for the other's workers, and a command pointed at the other's
    queue still is."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    path = make_fleet(ours, 3600.0)
    make_fleet(theirs, 3600.0)
    env = await _own_server()
    try:
        address = env.client.service_client.config.target_host
        async with build_worker(env.client, path, TASK_QUEUE):  # ours, on the default queue
            await asyncio.sleep(1.0)
            status = ("train", "status", "--cluster", "c00")
            code, out = await asyncio.to_thread(_cli, theirs, address, *status)
            assert code == 2 and out["field"] == "address", out  # theirs, asking our queue
            assert TASK_QUEUE in str(out["error"]), out
            queue = {"TRAINCTL_TASK_QUEUE": "theirs-queue"}
            code, out = await asyncio.to_thread(_cli, theirs, address, *status, env=queue)
            assert out.get("field") != "address", out  # theirs, on its own queue
            spec = theirs / "train.json"
            never = {"blackouts": [{"from": "2000-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}]}
            train = {"cluster": "c00", "targets": {"os": "6.8.0-45"}, "schedule": never}
            spec.write_text(json.dumps(train))  # it holds no host: its window never opens
            start = ("train", "start", "--spec", str(spec), "--task-queue", "theirs-queue")
            async with build_worker(env.client, theirs / "fleet.db", "theirs-queue"):
                code, out = await asyncio.to_thread(_cli, theirs, address, *start)
                await env.client.get_workflow_handle("train-c00").terminate("test over")
            assert code == 0, out  # theirs, started on its own queue
    finally:
        await env.shutdown()


async def _own_server() -> WorkflowEnvironment:
    """A dev server of the test's own, so whichever queue its workers poll is nobody else's."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=timedelta(seconds=60),
    )


def _identity(worker: object) -> str:
    config = getattr(worker, "_config")  # noqa: B009 - the SDK keeps the identity here
    return str(config["identity"])
