"""A bulk operation keeps to its maintenance windows, on the time-skipping server (speed 1).

No wave starts outside the spec's windows or inside a blackout; a wave already going finishes.
Read from the fleet's event log: when the operation cordoned each host.
"""

from __future__ import annotations

import json
from datetime import datetime

from orchestrator.fleet import SqliteFleet
from orchestrator.ops import parse_spec_text
from orchestrator.planning.windows import fleet_datetime, window_state
from orchestrator.schedule_window import Schedule
from tests.test_ops_exec import audit_ok, op_spec, outcome, start_op, worker
from tests.train_helpers import make_fleet


async def test_operation_starts_waves_only_inside_its_windows(temporal_env, tmp_home, task_queue):
    """Waves begin only in the 1 h windows every 6 h; the operation still ends, succeeded."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    schedule = {"windows": [{"cron": "0 */6 * * *", "duration": "1h"}]}
    spec = op_spec(schedule=schedule, budget={"max_unavailable": "10%"})
    async with worker(temporal_env, path, task_queue):
        status = await outcome(await start_op(temporal_env, task_queue, spec))
    assert status.state == "succeeded", status.reason
    op = parse_spec_text(json.dumps(spec)).operation_id
    fleet = SqliteFleet(path)
    try:
        anchor = datetime.fromisoformat(fleet.get_meta()["anchor_wall"])
        cordons = [
            ev.t
            for _, ev, _ in fleet.events()
            if ev.kind == "host_state"
            and ev.detail.get("owner") == op
            and ev.detail.get("after") == "cordoned"
        ]
    finally:
        fleet.close()
    sched = Schedule.model_validate(schedule)
    starts = set()
    for t in cordons:
        at = fleet_datetime(anchor, t)
        ws = window_state(sched, at)
        assert ws.open, f"a host was cordoned at {at}, outside the windows"
        starts.add(ws.closes_at)
    assert len(cordons) >= 100 and len(starts) >= 2, (len(cordons), starts)
    assert status.clusters["c00"].waves_done >= 2
    audit_ok(path)


def test_operation_schedule_refuses_hard_stop():
    """An operation's wave always finishes, so `hard_stop` is refused naming the field."""
    spec = op_spec(
        schedule={"windows": [{"cron": "0 * * * *", "duration": "1h"}], "hard_stop": True}
    )
    try:
        parse_spec_text(json.dumps(spec))
    except ValueError as err:
        assert str(err).startswith("schedule.hard_stop:") or "schedule.hard_stop" in str(err)
    else:
        raise AssertionError("hard_stop accepted")
