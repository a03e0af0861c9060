"""Maintenance windows and blackouts on a live train, on the time-skipping server.

The fleet runs at speed 1 from the server's time, so fleet time is the workflows' time and the
windows' cron is evaluated on it: days of windows pass in seconds. What is checked comes from
the fleet's own event log (when each host was cordoned, when it came back), not the workflow's
word.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.cron import next_fire, parse_cron
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.planning.windows import fleet_datetime, window_state
from orchestrator.train.status import visit_figures
from tests.train_helpers import make_fleet, spec
from workflows.cluster_train import ClusterTrain

#: How long after a close the hand-back may take in fleet time (see the hard_stop test).
HAND_BACK_HOURS = 0.25
HELD = frozenset({"cordoned", "draining", "in_maintenance", "verifying"})


def _fleet_log(path: Path) -> tuple[datetime, list[Any]]:
    fleet = SqliteFleet(path)
    try:
        anchor = datetime.fromisoformat(fleet.get_meta()["anchor_wall"])
        return anchor, [ev for _, ev, _ in fleet.events()]
    finally:
        fleet.close()


def _cordons(events: list[Any]) -> list[tuple[float, str]]:
    return [
        (ev.t, ev.host)
        for ev in events
        if ev.kind == "host_state" and ev.detail.get("after") == "cordoned"
    ]


def _held_at(events: list[Any], t: float) -> set[str]:
    """Hosts out of service for maintenance at fleet hour ``t`` (their last state then)."""
    state: dict[str, str] = {}
    for ev in events:
        if ev.t > t:
            break
        if ev.kind == "host_state" and ev.host:
            state[ev.host] = ev.detail.get("after", "")
    return {h for h, s in state.items() if s in HELD}


def _audit_ok(path: Path) -> None:
    fleet = SqliteFleet(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    assert report.ok, report.violations[:3]


async def test_train_keeps_to_windows_resumes_its_cycle_and_honours_a_blackout(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str
):
    """Hosts are taken only inside windows outside the blackout; the cycle carries on across
    windows (no host visited twice) and completes once."""
    start = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, start)
    # Open 3 h of every 8 h; one whole window (the second) falls in a blackout.
    first = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=8)
    first -= timedelta(hours=first.hour % 8)
    blackout = {
        "from": (first + timedelta(hours=7)).isoformat(),
        "to": (first + timedelta(hours=12)).isoformat(),
    }
    schedule = {"windows": [{"cron": "0 */8 * * *", "duration": "3h"}], "blackouts": [blackout]}
    train_spec = spec(domain_size=16, stop_after_cycles=1, schedule=schedule)
    async with build_worker(temporal_env.client, path, task_queue):
        status: TrainStatus = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert status.cycles_completed == 1
    anchor, events = _fleet_log(path)
    cordons = _cordons(events)
    sched = Schedule.model_validate(schedule)
    windows_used = set()
    for t, host in cordons:
        at = fleet_datetime(anchor, t)
        assert window_state(sched, at).open, f"{host} cordoned at {at}, outside the windows"
        windows_used.add(int((at - first).total_seconds() // (8 * 3600)))
    assert len(windows_used) >= 3, windows_used  # paused at each end, resumed at each start
    assert 1 not in windows_used  # the window inside the blackout stayed shut
    repaired = {ev.host for ev in events if ev.detail.get("after") == "in_repair"}
    # A visit is a host's maintenance (a host may be cordoned twice: a drain hands a job's
    # hosts back untouched when the job says "not now", and takes them again later).
    visited = [
        ev.host
        for ev in events
        if ev.kind == "host_state"
        and ev.detail.get("after") == "in_maintenance"
        and ev.host not in repaired
    ]
    assert len(visited) == len(set(visited)), "a host was visited twice: the cycle restarted"
    assert sum(visit_figures(status)) == 128
    _audit_ok(path)


async def test_hard_stop_holds_nothing_after_the_window_closes(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str
):
    """With hard_stop, domains in flight when a window closes hand their hosts back at once;
    between windows the train reports it is waiting, with the next start."""
    start = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, start)
    schedule = {"windows": [{"cron": "0 */6 * * *", "duration": "2h"}], "hard_stop": True}
    train_spec = spec(domain_size=16, drain={"max_wait": "4h"}, schedule=schedule)
    seen: list[TrainStatus] = []
    async with build_worker(temporal_env.client, path, task_queue):
        handle = await temporal_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        first = next_fire(parse_cron("0 */6 * * *"), start + timedelta(minutes=1))
        assert first is not None
        for offset in (1, 3, 7, 9, 13, 15, 19, 21, 25, 27):  # in and after five windows
            now = await temporal_env.get_current_time()
            await temporal_env.sleep(first + timedelta(hours=offset) - now)
            seen.append(await handle.query(ClusterTrain.status))
        await handle.execute_update(ClusterTrain.stop, {"reason": "test over"})
        await handle.result()
    anchor, events = _fleet_log(path)
    sched = Schedule.model_validate(schedule)
    closes, held_before = [], 0
    t = 0.0
    while t < 34:
        ws = window_state(sched, fleet_datetime(anchor, t))
        if ws.open and ws.closes_at is not None:
            close = (ws.closes_at - anchor).total_seconds() / 3600
            closes.append(close)
            held_before += len(_held_at(events, close - 0.05))
            t = close + 0.01
        else:
            t += 0.25
    assert len(closes) >= 4
    assert held_before > 0, "no domain was ever in flight at a close: nothing tested"
    for close in closes:
        # The hand-back starts at the close; its activities (fleet_options: retried, up to
        # 10 minutes) may see the time-skipping server move time on meanwhile.
        bad = _held_at(events, close + HAND_BACK_HOURS)
        assert not bad, f"hosts held after the close at {close:.2f}"
    waiting = [s for s in seen if s.window_state == "waiting"]
    assert waiting and all(s.next_window_start is not None for s in waiting)
    assert any(s.window_state == "open" and s.window_closes_at for s in seen)
    _audit_ok(path)
