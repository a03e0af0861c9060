"""Soak between batches on a live train, on the time-skipping server, checked from the fleet's
own record: no host is taken into a domain within ``soak`` of the latest host the train returned.

The fleet runs at speed 1 from the server's time, so hours of soak pass in seconds.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.execution.soak import Soak
from tests.e2e import audit_ok, op_spec, outcome, start_op, worker
from tests.test_train_windows import _audit_ok, _fleet_log
from tests.train_helpers import make_fleet, spec
from workflows.cluster_train import ClusterTrain

SOAK_HOURS = 1.0
RACKS = ["z01-r005", "z01-r006"]


def _maintained_takes(events: list[Any]) -> list[tuple[float, str]]:
    """(fleet hour, host) of each take that went on to maintenance: a cordon followed, before
    the host served again, by ``in_maintenance`` (a piggyback take handed back untouched, or a
    host a job refused, is no domain's work)."""
    taken: dict[str, float] = {}
    out = []
    for ev in events:
        if ev.kind != "host_state" or not ev.host:
            continue
        after = ev.detail.get("after")
        if after == "cordoned":
            taken[ev.host] = ev.t
        elif after == "in_maintenance" and ev.host in taken:
            out.append((taken.pop(ev.host), ev.host))
        elif after == "in_service":
            taken.pop(ev.host, None)
    return sorted(out)


def _returns(events: list[Any]) -> list[float]:
    """Fleet hours at which a verified host went back to service."""
    return sorted(
        ev.t
        for ev in events
        if ev.kind == "host_state"
        and ev.detail.get("before") == "verifying"
        and ev.detail.get("after") == "in_service"
    )


async def test_a_train_with_a_soak_takes_no_domain_within_it_of_the_last_return(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str
):
    """soak: 1h on `small` (one domain of 16 at a time): every take that was maintained came at
    least an hour after every return before it, and the train still finished its cycle."""
    start = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, start)
    train_spec = spec(
        domain_size=16,
        budget={"max_unavailable": 24, "maintenance": 16},
        soak="1h",
        stop_after_cycles=1,
        halt_after_failures=50,
    )
    async with build_worker(temporal_env.client, path, task_queue):
        status: TrainStatus = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    _, events = _fleet_log(path)
    takes, returns = _maintained_takes(events), _returns(events)
    assert len({round(t, 6) for t, _ in takes}) >= 3, "fewer than three domains: nothing tested"
    for t, host in takes:
        before = [r for r in returns if r <= t]
        if before:
            gap = t - before[-1]
            assert gap >= SOAK_HOURS - 1e-6, f"{host} taken {gap:.3f} h after a return"
    assert status.cycles_completed == 1
    _audit_ok(path)


def test_soak_rule_and_refusals() -> None:
    """The soak holds until an hour after the return; negative or unparsable soaks are refused,
    naming soak."""
    soak = Soak(1.0)
    assert soak.holds(10.5, 10.0) and not soak.holds(11.0, 10.0) and not soak.holds(5.0, None)
    assert not Soak(None).holds(10.0, 10.0) and soak.until(10.0) == 11.0
    for bad in ("-30m", "soon"):
        with pytest.raises(ValidationError, match="soak"):
            spec(soak=bad)


async def test_an_operation_with_a_soak_starts_no_wave_within_it_of_the_last_return(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str
):
    """soak: 1h on a CUDA operation over `small`: every wave's take came at least an hour after
    the previous wave's returns, and the operation succeeded."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    spec = op_spec(
        soak="1h", scope={"cluster": "c00", "racks": RACKS}, budget={"max_unavailable": 8}
    )
    async with worker(temporal_env, path, task_queue):
        status = await outcome(await start_op(temporal_env, task_queue, spec))
    assert status.state == "succeeded", status.reason
    _, events = _fleet_log(path)
    takes, returns = _maintained_takes(events), _returns(events)
    assert len({round(t, 6) for t, _ in takes}) >= 2, "fewer than two waves: nothing tested"
    for t, host in takes:
        before = [r for r in returns if r <= t]
        if before:
            assert t - before[-1] >= SOAK_HOURS - 1e-6, f"{host} taken {t - before[-1]:.3f} h after"
    audit_ok(path)
