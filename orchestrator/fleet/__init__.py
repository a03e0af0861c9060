"""Fleet backends: the interface a real inventory and scheduler expose, and the simulated fleet."""

from __future__ import annotations

from pathlib import Path

from orchestrator.fleet.sqlite_fleet import SqliteFleet

FLEET_FILE = "fleet.db"


def fleet_path(home: Path | None = None) -> Path:
    from orchestrator.paths import trainctl_home

    return (home or trainctl_home()) / FLEET_FILE


def open_fleet(home: Path | None = None) -> SqliteFleet:
    """The fleet under ``TRAINCTL_HOME``; FileNotFoundError if none was initialised."""
    return SqliteFleet(fleet_path(home))


__all__ = ["SqliteFleet", "fleet_path", "open_fleet"]
