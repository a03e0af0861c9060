"""A live train and the simulator agree on one cycle's maintenance cost, part by part, within 15%.

Both records (the simulator's event log, the live SQLite fleet's) are replayed by the live
ledger (``telemetry.cost_ledger``), the code ``trainctl report`` runs: held capacity, work lost
since the last checkpoint, the pinned restart. The cycle is ``small``'s under rolling-serial,
which evicts at once, so the stops weigh in the cost (at least 5 of them), not only held hours.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.planning.cost import PARTS
from orchestrator.telemetry.cost_ledger import replay
from tests.sim_recording import RecordingEngine, sim_config_of
from tests.train_helpers import TARGETS, make_fleet, spec
from workflows.cluster_train import ClusterTrain

#: A part under this many GPU-hours on both sides is compared to it, not to 15% of itself.
SMALL_PART = 1.0


def parts_of(entries: list[RecordEntry]) -> tuple[dict[str, float], int]:
    """The train's cost by part from a record, and the stops it caused."""
    reps = replay(((0, e, "c00") for e in entries), start=0.0)
    ledger = reps["c00"].ledger
    return ledger.parts(), ledger.stops


async def test_live_train_and_simulator_agree_part_by_part_on_a_cycle_with_evictions(
    temporal_env: Any, tmp_home: Any, task_queue: str
) -> None:
    """Same fleet, seed and spec: at least 5 evictions, and every part of the live train's cost
    within 15% of the simulator's."""
    train_spec = spec(stop_after_cycles=1, domain_size=8, policy="rolling-serial")
    cfg = sim_config_of(train_spec, TARGETS, 5)
    engine = RecordingEngine(build_cluster(cfg.preset, cfg.seed, cfg.cluster), cfg)
    assert engine.run().complete
    sim, sim_stops = parts_of(engine.log)

    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time(), seed=5)
    async with build_worker(temporal_env.client, path, task_queue):
        live_status = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-cost-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert live_status.cycles_completed == 1
    fleet = SqliteFleet(path, read_only=True)
    try:
        live, live_stops = parts_of([e for _, e, _ in fleet.events()])
    finally:
        fleet.close()

    assert sim_stops >= 5 and live_stops >= 5, (sim_stops, live_stops)
    assert sim["lost_work"] > 0 and sim["restart"] > 0 and sim["held_idle"] > 0
    for part in PARTS:
        gap = abs(live[part] - sim[part])
        assert gap <= max(SMALL_PART, 0.15 * sim[part]), (part, live, sim)
    assert sum(live.values()) == pytest.approx(sum(sim.values()), rel=0.15)
