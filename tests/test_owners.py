"""One live owner per host: what an owner held goes back when it ends, and repair gives every
host back on every target recorded for it, whoever (or nobody) is left to pick it up.

Real dev server, real SQLite fleet at 10 fleet hours per wall second; hosts are sent to repair
through the fleet's own ``hand_to_repair`` (the path a failure or a drain-for-repair takes).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

from orchestrator.contracts.models import HostState
from orchestrator.contracts.train_types import ControlRequest, TrainInput
from orchestrator.fleet import SqliteFleet
from tests.e2e import CUDA, NEW, audit_ok, op_spec, outcome, start_op, upper, worker
from tests.train_helpers import TARGETS, host_states, make_fleet, spec
from workflows.cluster_train import ClusterTrain

SPEED = 36000.0  # fleet hours = wall seconds * 10
REPAIR_MAX_HOURS = 80.0  # the longest repair the fleet draws, plus a reimage retry


def _send_to_repair(path, hosts: list[str]) -> None:
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00", datetime.now(UTC)) as sim:
            for name in hosts:
                sim.hand_to_repair(name, "test", "sent to repair by the test")
    finally:
        fleet.close()


def _advance_past_repairs(path) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Let every repair finish (fleet time only moves when the fleet is read)."""
    fleet = SqliteFleet(path)
    try:
        later = datetime.now(UTC) + timedelta(seconds=REPAIR_MAX_HOURS * 3600 / SPEED)
        with fleet.cluster("c00", later):
            pass
    finally:
        fleet.close()
    return host_states(path)


async def _wait(pred, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def test_train_stopped_while_hosts_are_in_repair_leaves_none_held(
    dev_env, tmp_home, task_queue
):
    """Hosts in repair when the train stops come back in service with its updates (or go to
    quarantine), and nothing is left held by the train or waiting for it."""
    path = make_fleet(tmp_home, SPEED)
    victims = ["c00-z01-r005-h00", "c00-z01-r005-h01", "c00-z01-r006-h03"]
    async with worker(dev_env, path, task_queue):
        handle = await dev_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec()),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        await _wait(
            lambda: (
                sum(
                    v == TARGETS["os"]
                    for _, _, vs in host_states(path).values()
                    for c, v in vs.items()
                    if c == "os"
                )
                >= 8
            ),
            "the first visits",
        )
        _send_to_repair(path, victims)
        await handle.execute_update(ClusterTrain.stop, ControlRequest(reason="test"))
        final = await asyncio.wait_for(handle.result(), 60)
    assert final.state == "stopped"
    states = _advance_past_repairs(path)
    for name in victims:
        state, owner, versions = states[name]
        assert state in (HostState.IN_SERVICE, HostState.QUARANTINED), (name, state, owner)
        if state == HostState.IN_SERVICE:
            assert all(versions[c] == v for c, v in TARGETS.items()), (name, versions)
    held = {
        n: (s, o)
        for n, (s, o, _) in states.items()
        if s not in ("in_service", "in_repair", "quarantined")
    }
    assert not held, held
    audit_ok(path)


async def test_host_into_repair_during_a_cuda_operation_serves_on_the_new_stack(
    dev_env, tmp_home, task_queue
):
    """A host that falls into repair mid-operation is deferred, and once repaired it serves on
    the operation's driver/CUDA; the operation's succeeded scope audits clean."""
    path = make_fleet(tmp_home, SPEED)
    victim = "c00-z01-r007-h07"
    async with worker(dev_env, path, task_queue):
        handle = await start_op(dev_env, task_queue, op_spec())
        await _wait(
            lambda: sum(upper(vs) == NEW for _, _, vs in host_states(path).values()) >= 4,
            "the first wave",
        )
        if upper(host_states(path)[victim][2]) != NEW:
            _send_to_repair(path, [victim])
        status = await asyncio.wait_for(outcome(handle), 90)
    assert status.state == "succeeded", status.reason
    states = _advance_past_repairs(path)
    state, _, versions = states[victim]
    assert state in (HostState.IN_SERVICE, HostState.QUARANTINED), state
    if state == HostState.IN_SERVICE:
        assert upper(versions) == NEW and all(versions[c] == v for c, v in CUDA.items())
    for name, (s, _, vs) in states.items():
        if s == HostState.IN_SERVICE:
            assert upper(vs) == NEW, name
    audit_ok(path)
