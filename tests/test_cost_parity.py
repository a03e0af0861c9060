"""A live train and the simulator agree on one cycle's maintenance cost (issue 28), within 15%.

The cost is counted the same way on both sides, from the fleet's own record (the simulator's
event log, the live SQLite fleet's): the work lost since checkpoints by the jobs the train
stopped, the restart each of those stops costs at the yardstick's defaults (5 minutes plus 0.01
minute a host, all the job's GPUs), and the GPU-hours of hosts the train held out of service
(cordoned, draining, in maintenance, verifying). Same fleet, seed and spec as
``test_core_parity``: one visit cycle of ``small``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.models import GPUS_PER_HOST, CapacityBudget
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig
from orchestrator.simulator.engine import Engine
from tests.train_helpers import TARGETS, make_fleet, spec
from workflows.cluster_train import ClusterTrain

RESTART_BASE_H, RESTART_PER_HOST_H = 5.0 / 60.0, 0.01 / 60.0


def cycle_cost(entries: Iterable[RecordEntry]) -> dict[str, float]:
    """GPU-hours a train's cycle cost its jobs, from a fleet record (see the module docstring)."""
    lost = restart = held = 0.0
    since: dict[str, float] = {}
    end = 0.0
    for e in entries:
        end = max(end, e.t)
        d = e.detail
        if e.kind == "job_interrupted" and str(d.get("cause", "")).startswith("maintenance:"):
            hosts = int(d.get("hosts", 0))
            lost += float(d.get("lost_gpu_hours", 0.0))
            restart += (RESTART_BASE_H + RESTART_PER_HOST_H * hosts) * hosts * GPUS_PER_HOST
        elif e.kind == "host_state" and e.host is not None:
            if d.get("after") in HELD_STATES:
                since.setdefault(e.host, e.t)
            elif e.host in since:
                held += (e.t - since.pop(e.host)) * GPUS_PER_HOST
    held += sum((end - t) * GPUS_PER_HOST for t in since.values())
    return {"lost_work": lost, "restart": restart, "held": held, "total": lost + restart + held}


class _Recording(Engine):
    """The simulator, keeping its fleet's record (the engine drops it as it reads)."""

    log: list[RecordEntry]

    def _absorb(self) -> None:
        self.__dict__.setdefault("log", []).extend(self.sim.events)
        super()._absorb()


@pytest.mark.parametrize("seed", [5, 2])
async def test_live_train_and_simulator_agree_on_a_cycles_cost(
    temporal_env: Any, tmp_home: Any, task_queue: str, seed: int
) -> None:
    train_spec = spec(stop_after_cycles=1, domain_size=8)
    cfg = SimConfig(
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
    engine = _Recording(build_cluster(cfg.preset, cfg.seed, cfg.cluster), cfg)
    assert engine.run().complete
    sim = cycle_cost(engine.log)

    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time(), seed=seed)
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
        live = cycle_cost(e for _, e, _ in fleet.events())
    finally:
        fleet.close()

    assert sim["held"] > 0 and live["held"] > 0
    assert abs(live["total"] - sim["total"]) <= 0.15 * sim["total"], (live, sim)
