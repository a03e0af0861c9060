"""Fleet backends: the interface a real inventory and scheduler expose, and the simulated fleet."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from orchestrator.contracts.backend import ClusterBackend, FleetBackend
from orchestrator.contracts.errors import NoFleet
from orchestrator.fleet.sqlite_fleet import SqliteFleet

FLEET_FILE = "fleet.db"


def fleet_path(home: Path | None = None, *, create: bool = True) -> Path:
    """``fleet.db`` under ``home`` (default ``TRAINCTL_HOME``, created unless ``create`` is
    False, for a command that only reads)."""
    from orchestrator.contracts.paths import trainctl_home

    return (home or trainctl_home(create=create)) / FLEET_FILE


def open_fleet(home: Path | None = None, *, read_only: bool = False) -> SqliteFleet:
    """The fleet under ``TRAINCTL_HOME``; FileNotFoundError if none was initialised.

    A fleet initialised with ``--backend slurm`` opens as a ``SlurmFleet``, which offers what
    the command line reads of the simulated fleet (``preset``, ``seed``, ``events``, cluster
    sessions with ``hosts`` and ``jobs``), so every command works on either unchanged.
    ``read_only``: a command that only reads, which must work on a read-only or immutable
    file and never creates ``TRAINCTL_HOME``.
    """
    path = fleet_path(home, create=not read_only)
    if _is_slurm(path):
        from orchestrator.fleet.slurm import SlurmFleet

        return cast(SqliteFleet, SlurmFleet(path))
    return SqliteFleet(path, read_only=read_only)


def _is_slurm(path: Path) -> bool:
    from orchestrator.fleet.slurm.store import BACKEND, backend_of

    return path.is_file() and backend_of(path) == BACKEND


def open_backend(path: Path) -> FleetBackend:
    """The fleet backend stored at ``path`` (the simulated fleet, or Slurm when the fleet was
    initialised with ``--backend slurm``); NoFleet if none."""
    try:
        if _is_slurm(path):
            from orchestrator.fleet.slurm import SlurmFleet

            return SlurmFleet(path)
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
