"""Helpers shared by the train tests: a fleet in the test's home, a spec, a worker."""

from __future__ import annotations

import contextlib
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset

TARGETS = {"os": "6.8.0-45", "bios": "3.2", "nic_firmware": "28.41.1000"}


def make_fleet(
    home: Path, speed: float, wall: datetime | None = None, seed: int = 5, preset: str = "small"
) -> Path:
    path = home / "fleet.db"
    SqliteFleet.create(path, get_preset(preset), seed, speed, wall=wall).close()
    return path


def spec(**overrides: Any) -> TrainSpec:
    base: dict[str, Any] = {
        "cluster": "c00",
        "domain_size": 8,
        "budget": {"max_unavailable": "10%"},
        "targets": TARGETS,
        "drain": {"max_wait": "4h"},
        "halt_after_failures": 3,
    }
    base.update(overrides)
    return TrainSpec.model_validate(base)


def host_states(path: Path) -> dict[str, tuple[str, str, dict[str, str]]]:
    """name -> (state, owner, versions), read straight from the fleet file."""
    import json
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return {
            n: (s, o, json.loads(v))
            for n, s, o, v in conn.execute("SELECT name, state, owner, versions FROM hosts")
        }
    finally:
        conn.close()


def stop_processes(procs: list[subprocess.Popen[bytes]], wait: float = 40) -> None:
    """SIGTERM every process still running (a worker hands its hosts back), wait up to ``wait``
    seconds for each, then SIGKILL what is left."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(wait)
        if p.poll() is None:
            p.kill()
