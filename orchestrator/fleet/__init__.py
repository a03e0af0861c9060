"""Fleet backends: the interface a real inventory and scheduler expose, and the simulated fleet."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.contracts.backend import ClusterBackend, FleetBackend
from orchestrator.contracts.errors import NoFleet
from orchestrator.fleet.presets import Preset
from orchestrator.fleet.sqlite_fleet import SqliteFleet

if TYPE_CHECKING:
    from orchestrator.fleet.slurm.config import SlurmBackendConfig

FLEET_FILE = "fleet.db"


def fleet_path(home: Path | None = None, *, create: bool = True) -> Path:
    """``fleet.db`` under ``home`` (default ``TRAINCTL_HOME``, created unless ``create`` is
    False, for a command that only reads)."""
    from orchestrator.contracts.paths import trainctl_home

    return (home or trainctl_home(create=create)) / FLEET_FILE


def open_fleet(home: Path | None = None, *, read_only: bool = False) -> FleetBackend:
    """The fleet under ``TRAINCTL_HOME``; FileNotFoundError if none was initialised.

    A fleet initialised with ``--backend slurm`` opens as the Slurm backend; either way the
    caller sees only the ``FleetBackend`` Protocol, so every command works on either unchanged.
    ``read_only``: a command that only reads, which must work on a read-only or immutable
    file and never creates ``TRAINCTL_HOME``.
    """
    path = fleet_path(home, create=not read_only)
    if _is_slurm(path):
        from orchestrator.fleet.slurm import SlurmFleet

        return SlurmFleet(path)
    return SqliteFleet(path, read_only=read_only)


def create_fleet(
    path: Path, preset: Preset, seed: int, speed: float, wall: datetime | None = None
) -> FleetBackend:
    """Build a simulated fleet from ``preset`` at ``path`` (atomically) and open it."""
    return SqliteFleet.create(path, preset, seed, speed, wall)


def create_slurm_fleet(
    path: Path, members: Sequence[tuple[Path, SlurmBackendConfig, Path | None]]
) -> FleetBackend:
    """Record every node of the configured partitions of each Slurm cluster (its
    ``slurm.conf``, its backend config and that config's file) at ``path``: one fleet of
    several clusters, each with its own controller."""
    from orchestrator.fleet.slurm import SlurmFleet

    (conf, config, config_path), *more = members
    return SlurmFleet.create(path, conf, config, config_path, more=more)


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
    "create_fleet",
    "create_slurm_fleet",
    "fleet_path",
    "open_backend",
    "open_fleet",
]
