"""Operations wait for room instead of being refused for today's occupancy (issue 23, #4).

Hosts out for repair filling an operation's budget are today's state, not the operation's:
``ops plan`` / ``ops start`` no longer refuse it (nor ``--cron``, whose Schedule runs on another
day); each run waits in ``waiting_for_room`` (its status says which budget and how many are out)
at most ``max_wait_for_room`` of fleet time, then fails with exit 1 naming the budget.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.infra.schedules import schedule_view
from orchestrator.ops import parse_spec_text
from orchestrator.ops.client import operation_status
from orchestrator.planning.ops_plan import plan_operation
from tests.cli_inproc import cli
from tests.e2e import outcome, worker, write_spec
from tests.train_helpers import make_fleet

RACK = "c00-z00-r000"


def _reboot(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "reboot",
        "scope": {"cluster": "c00", "racks": [RACK]},
        "budget": {"max_unavailable": 3},
        "drain": {"max_wait": "1h"},
        "request_id": f"room-{uuid.uuid4().hex[:6]}",
    }
    base.update(overrides)
    return base


def _outage(path: Path, hours: float) -> list[str]:
    """Send three in-service hosts outside the scope's rack to repair for ``hours``."""
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            victims = [
                n
                for n, h in sorted(sim.hosts.items())
                if h.state == "in_service" and not n.startswith(RACK)
            ][:3]
            for name in victims:
                sim.hand_to_repair(name, "test", "outage for the test")
                sim.hosts[name].repair_until = sim.now + hours
                sim.dirty_hosts.add(name)
            return victims
    finally:
        fleet.close()


def _end_outage(path: Path, victims: list[str]) -> None:
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            for name in victims:
                sim.hosts[name].repair_until = sim.now
                sim.dirty_hosts.add(name)
    finally:
        fleet.close()


def test_plan_waits_for_room_instead_of_refusing(tmp_home: Path) -> None:
    """Repairs filling the budget: the plan has waves and says it waits, naming the budget."""
    path = make_fleet(tmp_home, 1.0)
    victims = _outage(path, 100.0)
    fleet = SqliteFleet(path)
    try:
        snap = fleet.peek("c00").snapshot()
    finally:
        fleet.close()
    plan = plan_operation(parse_spec_text(json.dumps(_reboot())), {"c00": snap})
    assert plan.refused is None and plan.waves, plan.refused
    [c] = plan.clusters
    assert c.waiting_for_room and "budget.max_unavailable" in c.waiting_for_room
    assert "3 hosts out of service" in c.waiting_for_room
    # who holds the budget, host by host, and the command that says why
    assert "in repair: " in c.waiting_for_room
    assert all(name in c.waiting_for_room for name in victims), c.waiting_for_room
    assert f"trainctl fleet host {min(victims)}" in c.waiting_for_room
    assert "waits for room" in plan.summary()
    eager = parse_spec_text(json.dumps(_reboot(max_wait_for_room=0)))  # asked not to wait
    refused = plan_operation(eager, {"c00": snap}).refused
    assert refused and "budget.max_unavailable" in refused and "max_wait_for_room" in refused


async def test_operations_wait_for_room_then_fail_or_run(dev_env, tmp_home, monkeypatch):
    """With repairs filling the budget: a one-off fails after max_wait_for_room (exit 1, the
    budget named), a --cron Schedule is created, and a run with time to wait shows
    ``waiting_for_room`` (a repeat of it too, exit 0) and succeeds once the repairs end."""
    path = make_fleet(tmp_home, 3600.0)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    queue = f"tq-{uuid.uuid4()}"
    victims = _outage(path, 1000.0)
    short = write_spec(tmp_home / "short.json", _reboot(max_wait_for_room="1h"))
    long_spec = _reboot(max_wait_for_room="200h")
    long = write_spec(tmp_home / "long.json", long_spec)
    async with worker(dev_env, path, queue):
        start = ("ops", "start", "--task-queue", queue, "--json")
        code, out, err = await asyncio.wait_for(cli(*start, "--spec", str(short), "--wait"), 60)
        assert code == 1, (out, err)
        assert out["state"] == "failed" and "budget.max_unavailable" in out["reason"], out
        assert "no room within max_wait_for_room (1 h)" in out["reason"], out

        code, sched, err = await cli(*start, "--spec", str(short), "--cron", "0 3 * * 2")
        assert code == 0 and sched["schedule_id"], (sched, err)
        sid = sched["schedule_id"]
        # A run of it (triggered now) waits for room like a one-off, then fails naming it.
        await dev_env.client.get_schedule_handle(sid).trigger()
        deadline = time.monotonic() + 30
        while not (runs := (await schedule_view(dev_env.client, sid)).recent_runs):
            assert time.monotonic() < deadline, "the triggered run never started"
            await asyncio.sleep(0.2)
        ran = dev_env.client.get_workflow_handle(runs[0].workflow_id, result_type=OperationStatus)
        run_status = await asyncio.wait_for(outcome(ran), 60)
        assert run_status.state == "failed", run_status
        assert "budget.max_unavailable" in run_status.reason, run_status.reason
        code, _, err = await cli("schedule", "delete", "--id", sid, "--json")
        assert code == 0, err

        code, first, err = await cli(*start, "--spec", str(long))
        assert code == 0 and first["started"], (first, err)
        op = first["operation_id"]
        deadline = time.monotonic() + 30
        while (st := await operation_status(dev_env.client, op)).state != "waiting_for_room":
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.2)
        code, shown, _ = await cli("ops", "status", "--id", op, "--json")
        assert code == 0 and shown["state"] == "waiting_for_room", shown
        assert "budget.max_unavailable" in shown["reason"] and "3 hosts" in shown["reason"]
        # Durations as people read them, in the workflow's own words (not ``199.9 h``).
        assert re.search(r"waits for room, at most 8 d( \d+ h)? more", shown["reason"]), shown
        assert "(max_wait_for_room 8 d 8 h)" in shown["reason"], shown
        code, again, _ = await cli(*start, "--spec", str(long))
        assert code == 0 and again["already_running"] and again["state"] == "waiting_for_room"

        _end_outage(path, victims)
        deadline = time.monotonic() + 60
        while (st := await operation_status(dev_env.client, op)).state not in (
            "succeeded",
            "failed",
        ):
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.5)
        assert st.state == "succeeded" and st.hosts_changed >= 6, st
    # An id naming nothing is bad input, for every control of operations and schedules.
    unknown = [("ops", v, "--id", "ops-nope") for v in ("status", "pause", "resume", "abort")]
    unknown += [("schedule", v, "--id", "ops-nope") for v in ("pause", "resume", "delete")]
    for args in unknown:
        res = await asyncio.to_thread(CliRunner().invoke, main, [*args, "--json"])
        assert res.exit_code == 2 and json.loads(res.stdout)["field"] == "id", (args, res.output)
    code, report, err = await cli("audit", "--json")
    assert code == 0, (report, err)


def test_a_cluster_without_a_train_is_bad_input() -> None:
    """No train of that id at all: exit 2 naming ``cluster``; one that has ended: exit 1."""
    import pytest

    from orchestrator.app.cli.common import BadInput, OperationFailed
    from orchestrator.app.cli.train import _steer
    from orchestrator.train.client import TrainNotFound

    async def raises(err: Exception) -> Any:
        raise err

    with pytest.raises(BadInput) as bad:
        asyncio.run(_steer(raises(TrainNotFound("no train train-c07: not found", absent=True))))
    assert bad.value.exit_code == 2 and bad.value.field == "cluster"
    with pytest.raises(OperationFailed) as ended:
        asyncio.run(_steer(raises(TrainNotFound("train-c07 has ended: completed"))))
    assert ended.value.exit_code == 1 and ended.value.field == "cluster"
