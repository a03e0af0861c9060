"""The simulator keeping its fleet's record, for tests that read it as the live ledger does."""

from __future__ import annotations

from typing import Any

from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.engine import Engine


class RecordingEngine(Engine):
    """The simulator, keeping its fleet's record (the engine drops it as it reads)."""

    log: list[RecordEntry]

    def _absorb(self) -> None:
        self.__dict__.setdefault("log", []).extend(self.sim.events)
        super()._absorb()


def sim_config_of(
    train_spec: TrainSpec, targets: dict[str, str], seed: int, **extra: Any
) -> SimConfig:
    """The simulator's run of ``train_spec`` on ``small``: what a live train of it does."""
    return SimConfig(
        preset=get_preset("small"),
        policy=train_spec.policy,
        budget=CapacityBudget.model_validate(train_spec.budget.model_dump()),
        domain_size=train_spec.domain_size,
        seed=seed,
        max_wait_hours=train_spec.drain.max_wait_hours,
        targets=dict(targets),
        halt_after_failures=train_spec.halt_after_failures,
        halt_failure_rate=train_spec.halt_failure_rate,
        **extra,
    )
