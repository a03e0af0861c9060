"""A train on its targets rests: no host drained, no job stopped, until something is pending.

The live ``ClusterTrain`` on the time-skipping server over a real SQLite fleet at speed 1, so
each skipped hour is an hour for the jobs, failures and repairs too.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.models import HostState
from orchestrator.contracts.train_types import ControlRequest, TrainChange, TrainInput, TrainStatus
from orchestrator.fleet import SqliteFleet
from tests.train_helpers import host_states, make_fleet, spec
from workflows.cluster_train import ClusterTrain

#: What every host of a fresh ``small`` fleet runs.
ON_TARGET = {"os": "6.8.0-40", "bios": "3.1", "nic_firmware": "28.39.1002"}
NEW_OS = "6.8.0-45"


def _events(path: Path, owner: str) -> tuple[Counter[str], Counter[str]]:
    """Per host: the train's cordons, and its installs (``updated``)."""
    fleet = SqliteFleet(path)
    try:
        cordons: Counter[str] = Counter()
        installs: Counter[str] = Counter()
        for _, e, _ in fleet.events():
            if e.host is None or e.actor != owner:
                continue
            if e.kind == "host_state" and e.detail.get("after") == HostState.CORDONED:
                cordons[e.host] += 1
            elif e.kind == "updated":
                installs[e.host] += 1
        return cordons, installs
    finally:
        fleet.close()


async def _until(
    env: WorkflowEnvironment, handle: WorkflowHandle, done: object, hours: float = 400.0
) -> TrainStatus:
    """Skip fleet time an hour at a time until ``done(status)`` holds (at most ``hours``)."""
    for _ in range(int(hours)):
        st = await handle.query(ClusterTrain.status)
        if done(st):  # type: ignore[operator]
            return st
        await env.sleep(timedelta(hours=1))
    raise AssertionError(f"not reached in {hours} fleet hours: {st}")


async def test_a_train_on_target_rests_and_wakes_for_new_targets(
    temporal_env, tmp_home, task_queue
):
    """Started on what its cluster runs, a train checks every host, rests 100 fleet hours with
    no cordon and no job interrupted; a new os starts one cycle that updates every serving host
    once, and it rests again."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    train_spec = spec(targets=ON_TARGET)
    owner = train_spec.workflow_id
    async with build_worker(temporal_env.client, path, task_queue):
        handle = await temporal_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-rests-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        st = await _until(temporal_env, handle, lambda s: s.resting)
        assert st.cycles_completed == 1 and st.checked_total >= 120
        rested_from = st.fleet_hours
        await temporal_env.sleep(timedelta(hours=100))
        st = await handle.query(ClusterTrain.status)
        assert st.resting and st.state == "running" and "resting" in st.waiting
        assert st.fleet_hours >= rested_from + 99 and st.cycles_completed == 1
        assert st.jobs_interrupted == 0 and st.visits_total == 0
        assert st.cycle_on_track is None  # no cycle target: no verdict, and none runs
        cordons, installs = _events(path, owner)
        assert not cordons and not installs

        await handle.execute_update(ClusterTrain.reconfigure, TrainChange(targets={"os": NEW_OS}))
        st = await _until(temporal_env, handle, lambda s: s.resting and s.cycles_completed == 2)
        cordons, installs = _events(path, owner)
        serving = {
            n: v for n, (state, _, v) in host_states(path).items() if state == HostState.IN_SERVICE
        }
        assert all(v["os"] == NEW_OS for v in serving.values())
        assert max(installs.values()) == 1 and len(installs) >= 0.9 * len(serving)
        await temporal_env.sleep(timedelta(hours=24))
        again, _ = _events(path, owner)
        assert again == cordons  # resting again: nothing more drained
        await handle.execute_update(ClusterTrain.stop, ControlRequest(reason="test over"))
        await handle.result()
    fleet = SqliteFleet(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    assert report.ok, report.violations[:3]
