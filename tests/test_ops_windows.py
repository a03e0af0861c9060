"""A bulk operation keeps to its maintenance windows, on the time-skipping server (speed 1).

No wave starts outside the spec's windows or inside a blackout; a wave already going finishes.
Read from the fleet's event log: when the operation cordoned each host.
"""

from __future__ import annotations

import json
from datetime import datetime

from orchestrator.contracts.schedule_window import Schedule
from orchestrator.fleet import SqliteFleet
from orchestrator.ops import parse_spec_text
from orchestrator.planning.windows import fleet_datetime, window_state
from tests.e2e import audit_ok, op_spec, outcome, start_op, worker
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


#: Fleet hours a wave's cordons may land after the decision that started it (5 fleet minutes:
#: 83 wall milliseconds at 3,600x, a loaded machine's activity dispatch).
CORDON_LAG = 5 / 60


async def test_campaign_operations_keep_to_the_campaign_windows(
    dev_env, tmp_home, task_queue, monkeypatch
):
    """A CUDA campaign on four hosts whose window opens 20 fleet minutes after it starts, at
    one fleet hour a wall second (a 15-minute window lasts a quarter of a wall second): its
    bulk operation waits, starts waves only inside the windows, and the campaign succeeds. A
    wave decided in the window's last instant cordons its hosts in activities a few wall
    milliseconds later, which at 3,600x is a fleet minute or two: cordons within
    ``CORDON_LAG`` of a window's close count as inside it."""
    from tests.test_campaign_e2e import run_campaign

    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = make_fleet(tmp_home, 3600.0)
    fleet = SqliteFleet(path)
    anchor = datetime.fromisoformat(fleet.get_meta()["anchor_wall"])
    fleet.close()
    minute = (anchor.minute + 20) % 60  # fleet hour 0 is the anchor: closed at the start
    schedule = {"windows": [{"cron": f"{minute} * * * *", "duration": "15m"}]}
    spec = {
        "name": "cuda-windows",
        "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
        "stages": [{"name": "some", "clusters": ["c00"], "hosts": 4}],
        "schedule": schedule,
    }
    code, status = await run_campaign(dev_env, tmp_home, path, task_queue, spec)
    assert code == 0 and status.state == "succeeded", status.reason
    fleet = SqliteFleet(path)
    try:
        cordons = [
            ev.t
            for _, ev, _ in fleet.events()
            if ev.kind == "host_state"
            and str(ev.detail.get("owner", "")).startswith("ops-cuda-windows-")
            and ev.detail.get("after") == "cordoned"
        ]
    finally:
        fleet.close()
    sched = Schedule.model_validate(schedule)
    outside = [
        t
        for t in cordons
        if not window_state(sched, fleet_datetime(anchor, t)).open
        and not window_state(sched, fleet_datetime(anchor, t - CORDON_LAG)).open
    ]
    assert cordons and not outside, (len(cordons), outside[:3])
    assert min(cordons) >= 19 / 60  # it waited for the window
    audit_ok(path)


def test_campaign_schedule_is_parsed_and_refuses_hard_stop():
    """A campaign spec takes the same `schedule:`; hard_stop is refused naming the field."""
    import pytest

    from orchestrator.contracts.campaign_spec import CampaignSpec

    base = {
        "name": "c",
        "targets": {"bmc": "2.18.1"},
        "stages": [{"name": "s", "clusters": ["c00"]}],
    }
    win = {"windows": [{"cron": "0 22 * * 1-5", "duration": "6h"}]}
    assert CampaignSpec.model_validate({**base, "schedule": win}).schedule is not None
    with pytest.raises(ValueError, match="schedule.hard_stop"):
        CampaignSpec.model_validate({**base, "schedule": {**win, "hard_stop": True}})
