"""Days-long train behaviour on the time-skipping server: cycles, drain deadlines, repairs.

The fleet runs at speed 1 and takes its time from workflow.now(), so every day the server skips
is a day for the jobs, checkpoints and repairs too.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.models import HostState
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.train.status import visit_figures
from tests.train_helpers import TARGETS, host_states, make_fleet, spec
from workflows.cluster_train import ClusterTrain


async def _run_cycle(env: WorkflowEnvironment, path: Path, task_queue: str, **overrides: object):
    train_spec = spec(stop_after_cycles=1, **overrides)
    async with build_worker(env.client, path, task_queue):
        return await env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )


async def test_full_cycle_visits_every_host(temporal_env, tmp_home, task_queue):
    """One cycle updates and verifies every host, or quarantines it, over days of fleet time."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    status = await _run_cycle(temporal_env, path, task_queue, domain_size=12)
    assert status.cycles_completed == 1
    assert sum(visit_figures(status)) == 128
    assert status.hosts_visited_this_cycle >= 115
    assert status.last_cycle_fleet_hours > 24  # days-long, skipped in seconds
    states = host_states(path)
    for name, (state, owner, versions) in states.items():
        if state == HostState.IN_SERVICE:
            assert all(versions[c] == v for c, v in TARGETS.items()), name
        assert owner != status.cluster, f"{name} still held by the train"
    fleet = SqliteFleet(path)
    report = audit(fleet)
    fleet.close()
    assert report.ok, report.violations[:3]


async def test_drain_deadline_evicts_right_after_checkpoint(temporal_env, tmp_home, task_queue):
    """A job that would run for weeks is evicted within max_wait, right after a checkpoint."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    fleet = SqliteFleet(path)
    with fleet.cluster("c00", await temporal_env.get_current_time()) as sim:
        job = max((j for j in sim.jobs.values() if j.state == "running"), key=lambda j: j.size)
        job.work_hours = 24 * 60.0  # two months
        sim.state.job_behaviours[str(job.id)] = "checkpoint"  # it answers: after my checkpoint
        sim.dirty_jobs.add(job.id)
        long_job, long_hosts = job.id, set(job.hosts)
    await _run_cycle(temporal_env, path, task_queue, domain_size=16, drain={"max_wait": "3h"})
    cordoned_at: dict[str, float] = {}
    evictions = []
    for _, ev, _ in fleet.events():
        cordon = ev.kind == "host_state" and ev.detail.get("after") == "cordoned"
        if cordon and ev.host in long_hosts:
            cordoned_at.setdefault(ev.host, ev.t)
        if ev.kind == "job_interrupted" and ev.detail["job"] == long_job:
            evictions.append(ev)
    fleet.close()
    assert evictions, "the long job was never evicted"
    first = evictions[0]
    assert first.detail["cause"].startswith("maintenance:")
    assert first.t <= min(cordoned_at.values()) + 3.0 + 1e-6
    assert first.detail["lost_gpu_hours"] < 1.0  # right after a checkpoint: nothing lost


async def test_repaired_host_updated_before_service(temporal_env, tmp_home, task_queue):
    """A host back from repair mid-cycle is reimaged with the train's recorded targets before it
    serves jobs again (by repair itself, so it never waits for the train)."""
    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now)
    fleet = SqliteFleet(path)
    victim = "c00-z01-r007-h03"
    with fleet.cluster("c00", now) as sim:
        sim.set_targets(TARGETS, "test")
        h = sim.hosts[victim]
        if h.job_id is not None:
            sim.evict(h.job_id, "test")
        h.repair_until, h.owner = sim.now + 30.0, "repair"
        sim._set_state(h, HostState.IN_REPAIR, "fleet", "faulty_gpu")
    await _run_cycle(temporal_env, path, task_queue, domain_size=8)
    trail = [ev for _, ev, _ in fleet.events() if ev.host == victim]
    fleet.close()
    by_repair = [e for e in trail if e.actor == "repair"]
    updated = [e for e in by_repair if e.kind == "updated"]
    assert updated and updated[0].detail["after"]["os"] == TARGETS["os"]
    back = [e for e in trail if e.kind == "host_state" and e.detail.get("after") == "in_service"]
    assert back and back[0].t >= updated[0].t and back[0].actor == "repair"
    state, _, versions = host_states(path)[victim]
    assert state == "in_service" and versions["os"] == TARGETS["os"]


async def test_train_continues_as_new_and_keeps_its_cycle(temporal_env, tmp_home, task_queue):
    """With a small history limit the train continues as new and still finishes its cycles."""
    from temporalio.client import WorkflowExecutionStatus

    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    wid = f"train-c00-{uuid.uuid4().hex[:6]}"
    async with build_worker(temporal_env.client, path, task_queue):
        handle = await temporal_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec(stop_after_cycles=1, domain_size=16), max_history_events=150),
            id=wid,
            task_queue=task_queue,
        )
        status = await handle.result()
    first = temporal_env.client.get_workflow_handle(wid, run_id=handle.first_execution_run_id)
    assert (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    assert status.cycles_completed == 1
    assert sum(visit_figures(status)) == 128
    # counters carried over: drained visits and hosts checked in place (back from repair)
    assert status.visits_total + status.checked_total >= status.hosts_visited_this_cycle
