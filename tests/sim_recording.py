"""The simulator keeping its fleet's record, for tests that read it as the live ledger does."""

from __future__ import annotations

from orchestrator.contracts.backend import RecordEntry
from orchestrator.simulator.engine import Engine


class RecordingEngine(Engine):
    """The simulator, keeping its fleet's record (the engine drops it as it reads)."""

    log: list[RecordEntry]

    def _absorb(self) -> None:
        self.__dict__.setdefault("log", []).extend(self.sim.events)
        super()._absorb()
