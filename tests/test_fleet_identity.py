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


def _cli(home: Path, address: str, *args: str) -> tuple[int, dict[str, object]]:
    env = {**os.environ, "TRAINCTL_HOME": str(home), "TEMPORAL_ADDRESS": address}
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
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=timedelta(seconds=60),
    )
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


def _identity(worker: object) -> str:
    config = getattr(worker, "_config")  # noqa: B009 - the SDK keeps the identity here
    return str(config["identity"])
