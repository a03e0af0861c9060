"""Fleet backends: the interface a real inventory and scheduler expose, and the simulated fleet."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import NoFleet
from orchestrator.fleet.backend import ClusterBackend, FleetBackend
from orchestrator.fleet.sqlite_fleet import SqliteFleet

FLEET_FILE = "fleet.db"


def fleet_path(home: Path | None = None) -> Path:
    from orchestrator.paths import trainctl_home

    return (home or trainctl_home()) / FLEET_FILE


def open_fleet(home: Path | None = None) -> SqliteFleet:
    """The fleet under ``TRAINCTL_HOME``; FileNotFoundError if none was initialised."""
    return SqliteFleet(fleet_path(home))


def open_backend(path: Path) -> FleetBackend:
    """The fleet backend stored at ``path`` (today: the simulated fleet); NoFleet if none."""
    try:
        return SqliteFleet(path)
    except FileNotFoundError as err:
        raise NoFleet(str(err)) from None


__all__ = [
    "ClusterBackend",
    "FleetBackend",
    "SqliteFleet",
    "fleet_path",
    "open_backend",
    "open_fleet",
]
