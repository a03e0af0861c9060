"""Steering a train through the CLI, the smaller defects of issue 10 (item 10).

- `train status` with the worker down answered after 30 s that the train did not exist;
- controlling a cluster the fleet does not have exited 1 while `train start` exits 2;
- `resume` of a running train was accepted (and reset its failure count);
- a second `stop` exited 1;
- a stopped train's status still showed hosts "in maintenance";
- unknown fields and booleans in a live `reconfigure` change were accepted.

The CLI runs in a thread (``CliRunner`` and its own ``asyncio.run``) while the test's event loop
runs a real worker on the dev server; the train is ``train-c00``, the id the CLI addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.cli import main
from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.train_types import TrainChange
from orchestrator.train.client import start_train, train_handle, train_result
from tests.train_helpers import make_fleet, spec

SPEED = 36000.0  # 10 fleet hours per wall second


def address(env: WorkflowEnvironment) -> str:
    return str(env.client.service_client.config.target_host)


async def cli(env: WorkflowEnvironment | None, *args: str) -> Result:
    """The CLI with --json (and the dev server's address), in a thread: our loop keeps going."""
    extra = ["--address", address(env)] if env is not None else []
    return await asyncio.to_thread(CliRunner().invoke, main, [*args, *extra, "--json"])


def answer(result: Result, code: int) -> dict[str, Any]:
    assert result.exit_code == code, result.output
    (line,) = result.stdout.splitlines()
    out: dict[str, Any] = json.loads(line)
    if code:
        assert out["exit_code"] == code and "Traceback" not in result.output, out
    return out


async def _terminate(client: Client, workflow_id: str) -> None:
    with contextlib.suppress(RPCError):
        await client.get_workflow_handle(workflow_id).terminate("test cleanup")


@contextlib.asynccontextmanager
async def clean_train(client: Client) -> AsyncIterator[None]:
    """No train-c00 (nor its arbiter) before or after: the CLI's ids are the production ones."""
    for wid in ("train-c00", arbiter_workflow_id("c00")):
        await _terminate(client, wid)
    try:
        yield
    finally:
        for wid in ("train-c00", arbiter_workflow_id("c00")):
            await _terminate(client, wid)


async def test_status_with_the_worker_down_says_so_quickly(
    dev_env, tmp_home, task_queue, monkeypatch
):
    """No worker polls the train's queue: `train status` answers within seconds that the train
    is running but no worker answers, exit 1, instead of 30 s and "no such train"; a control
    gives up the same way (after a shortened wait here)."""
    import orchestrator.train.client as train_client

    make_fleet(tmp_home, SPEED)
    async with clean_train(dev_env.client):
        await start_train(dev_env.client, spec(), task_queue=f"{task_queue}-nobody")
        out = answer(await cli(dev_env, "train", "status", "--cluster", "c00"), 1)
        assert "running" in out["error"] and "no worker answered" in out["error"], out
        assert "trainctl worker" in out["error"]
        # It gave up at its own bound (the query's deadline), not the server's 30 s default.
        assert f"within {train_client.QUERY_TIMEOUT.total_seconds():g}s" in out["error"], out
        monkeypatch.setattr(train_client, "UPDATE_TIMEOUT", timedelta(seconds=2))
        out = answer(await cli(dev_env, "train", "pause", "--cluster", "c00"), 1)
        assert "no worker answered" in out["error"], out


async def test_controls_of_a_cluster_not_in_the_fleet_exit_2(tmp_home):
    """Like `train start`, every control names an unknown cluster as bad input (exit 2)."""
    make_fleet(tmp_home, SPEED)
    for verb in ("status", "pause", "resume", "stop"):
        out = answer(await cli(None, "train", verb, "--cluster", "c99"), 2)
        assert out["field"] == "cluster" and "c99" in out["error"], out
    out = answer(
        await cli(None, "train", "reconfigure", "--cluster", "c99", "--domain-size", "4"), 2
    )
    assert out["field"] == "cluster"


async def test_resume_of_a_running_train_is_refused_and_a_second_stop_is_fine(
    dev_env, tmp_home, task_queue
):
    """resume of a running train: exit 2 (nothing changes, its failure count included); stop
    twice: exit 0 both times; once stopped, status shows no host in maintenance."""
    path = make_fleet(tmp_home, SPEED)
    async with clean_train(dev_env.client), build_worker(dev_env.client, path, task_queue):
        await start_train(dev_env.client, spec(), task_queue=task_queue)
        handle = train_handle(dev_env.client, "c00")
        deadline = time.monotonic() + 60
        while True:  # until the train holds hosts: the stopped status must not show them
            st = answer(await cli(dev_env, "train", "status", "--cluster", "c00"), 0)
            if st["in_maintenance"] > 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert st["state"] == "running" and st["in_maintenance"] > 0, st

        out = answer(await cli(dev_env, "train", "resume", "--cluster", "c00"), 0)
        assert out["state"] == "running", out  # a resume of what runs: success, unchanged

        first = answer(await cli(dev_env, "train", "stop", "--cluster", "c00"), 0)
        assert first["state"] == "stopping"
        again = answer(await cli(dev_env, "train", "stop", "--cluster", "c00"), 0)
        assert again["state"] in ("stopping", "stopped")
        final = await asyncio.wait_for(train_result(dev_env.client, "c00"), 60)
        assert final.state == "stopped" and final.in_maintenance == 0
        third = answer(await cli(dev_env, "train", "stop", "--cluster", "c00"), 0)
        assert third["state"] == "stopped" and third["in_maintenance"] == 0, third
        status = answer(await cli(dev_env, "train", "status", "--cluster", "c00"), 0)
        assert status["state"] == "stopped" and status["in_maintenance"] == 0, status
        out = answer(await cli(dev_env, "train", "pause", "--cluster", "c00"), 1)
        assert "has ended" in out["error"], out
        assert (await handle.describe()).status is not None


@pytest.mark.parametrize(
    "change",
    [{"domain_sise": 4}, {"domain_size": True}, {"halt_after_failures": True}, {"budget": 3}],
)
def test_train_change_is_strict(change: dict[str, Any]) -> None:
    """The live change refuses unknown fields and booleans as counts (they read as 1)."""
    with pytest.raises(ValueError):
        TrainChange.model_validate(change)


async def test_a_running_train_refuses_a_change_with_unknown_fields(dev_env, tmp_home, task_queue):
    """An update sent by another client (raw JSON) with a typo is refused, not half-applied."""
    path = make_fleet(tmp_home, SPEED)
    async with clean_train(dev_env.client), build_worker(dev_env.client, path, task_queue):
        await start_train(dev_env.client, spec(), task_queue=task_queue)
        handle = train_handle(dev_env.client, "c00")
        for bad in ({"domain_sise": 2}, {"domain_size": True}):
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update("reconfigure", bad)
        st = answer(await cli(dev_env, "train", "status", "--cluster", "c00"), 0)
        assert st["domain_size"] == 8
        ok = answer(
            await cli(dev_env, "train", "reconfigure", "--cluster", "c00", "--domain-size", "4"), 0
        )
        assert ok["domain_size"] == 4
