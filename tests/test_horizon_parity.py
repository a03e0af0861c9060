"""A week of a live train and ``simulate --horizon`` on the same seeded ``small`` fleet agree on
pacing, restarts and backfill.

The live ``ClusterTrain`` runs on the time-skipping server over a SQLite fleet at speed 1 built
to schedule as the horizon simulator does (EASY backfill, the pinned restart), with a 72 h cycle
target; the simulator runs the same spec for 7 fleet days. Both records are read the same way.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.train_types import ControlRequest, TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import get_preset
from orchestrator.planning.cost import RESTART_HOURS
from orchestrator.telemetry.cost_ledger import replay
from tests.sim_recording import RecordingEngine, sim_config_of
from tests.train_helpers import TARGETS, spec
from workflows.cluster_train import ClusterTrain

HORIZON_HOURS = 7 * 24.0


def week(entries: list[RecordEntry]) -> dict[str, Any]:
    """Pacing, restarts and backfill of a record's first week."""
    first = [e for e in entries if e.t <= HORIZON_HOURS]
    returned = sorted(
        e.t for e in first if e.kind == "host_state" and e.detail.get("after") == "in_service"
    )
    ledger = replay(((0, e, "c00") for e in first), start=0.0)["c00"].ledger
    return {
        "returned": len(returned),
        "median_return_hours": returned[len(returned) // 2] if returned else None,
        "stops": ledger.stops,
        "restart": ledger.parts()["restart"],
        "lost_work": ledger.parts()["lost_work"],
        "job_starts": sum(1 for e in first if e.kind == "job_start"),
        "restarting_starts": sum(
            1 for e in first if e.kind == "job_start" and e.detail.get("restart_hours")
        ),
    }


async def test_a_week_of_live_train_and_simulate_horizon_agree(
    temporal_env: Any, tmp_home: Any, task_queue: str
) -> None:
    """Same fleet, seed, spec and scheduler: over 7 fleet days the live train returns as many
    hosts to service as the simulator, at the same pace, stops as many jobs, pays the same
    restarts, and the scheduler starts (backfills) as many jobs, each within 15%."""
    train_spec = spec(domain_size=8, cycle_target="72h")
    cfg = sim_config_of(
        train_spec, TARGETS, 5, cycle_target_hours=72.0, horizon_hours=HORIZON_HOURS
    )
    engine = RecordingEngine(build_cluster(cfg.preset, cfg.seed, cfg.cluster), cfg)
    engine.run()
    sim = week(engine.log)

    path = tmp_home / "fleet.db"
    wall = await temporal_env.get_current_time()
    SqliteFleet.create(
        path, get_preset("small"), 5, 1.0, wall=wall, easy_restart_hours=RESTART_HOURS
    ).close()
    async with build_worker(temporal_env.client, path, task_queue):
        handle = await temporal_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-week-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        for _ in range(int(HORIZON_HOURS // 12) + 1):
            await temporal_env.sleep(timedelta(hours=12))
        await handle.execute_update(ClusterTrain.stop, ControlRequest(reason="a week is over"))
        await handle.result()
    fleet = SqliteFleet(path, read_only=True)
    try:
        live = week([e for _, e, _ in fleet.events()])
        report = audit(fleet)
    finally:
        fleet.close()

    assert sim["stops"] >= 1 and sim["restarting_starts"] >= 1
    for key in ("returned", "stops", "restart", "job_starts", "restarting_starts"):
        assert live[key] == pytest.approx(sim[key], rel=0.15, abs=2), (key, live, sim)
    # pacing: the hosts come back at the same time of the week
    assert live["median_return_hours"] == pytest.approx(sim["median_return_hours"], rel=0.05)
    assert report.ok, report.violations[:3]
