"""The simulator and the live train make the same core decisions on the same fleet and seed.

Both run one visit cycle of the ``small`` fleet (128 hosts) with the same spec: the simulator in
its virtual clock, the live ``ClusterTrain`` on the time-skipping Temporal server over a real
SQLite fleet at speed 1 (a skipped day is a day for the jobs too). They share the planning and
execution core, so visits, quarantines, interruptions and lost work must agree (within the
issue's tolerances: a few milliseconds of wall time per activity are fleet time in the live run).
"""

from __future__ import annotations

import uuid

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig, simulate
from tests.train_helpers import TARGETS, make_fleet, spec
from workflows.cluster_train import ClusterTrain


@pytest.mark.parametrize("seed", [5, 2])
async def test_simulator_and_live_train_agree(temporal_env, tmp_home, task_queue, seed):
    """Same fleet, seed and spec: the simulator's cycle matches the live train's."""
    train_spec = spec(stop_after_cycles=1, domain_size=8)
    sim = simulate(
        SimConfig(
            preset=get_preset("small"),
            policy=train_spec.policy,
            budget=CapacityBudget.model_validate(train_spec.budget.model_dump()),
            domain_size=train_spec.domain_size,
            seed=seed,
            max_wait_hours=train_spec.drain.max_wait_hours,
            targets=dict(TARGETS),
            halt_after_failures=train_spec.halt_after_failures,
            halt_failure_rate=train_spec.halt_failure_rate,
        )
    )
    assert sim.complete

    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time(), seed=seed)
    async with build_worker(temporal_env.client, path, task_queue):
        live = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-parity-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert live.cycles_completed == 1

    assert abs(live.hosts_visited_this_cycle - sim.hosts_visited) <= 0.03 * sim.hosts_total
    assert abs(live.quarantined + live.in_repair - sim.hosts_quarantined) <= 2
    assert abs(live.jobs_interrupted - sim.job_interruptions) <= 2
    lost_gap = abs(live.lost_gpu_hours - sim.lost_gpu_hours)
    assert lost_gap <= max(5.0, 0.15 * sim.lost_gpu_hours)
    assert live.last_cycle_fleet_hours == pytest.approx(sim.makespan_hours, rel=0.05)

    fleet = SqliteFleet(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    assert report.ok, report.violations[:3]
