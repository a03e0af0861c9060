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
from orchestrator.fleet.store_url import FLEET_FILE, StoreRef, is_url, resolve_store

if TYPE_CHECKING:
    from orchestrator.fleet.slurm.config import SlurmBackendConfig


def fleet_path(home: Path | None = None, *, create: bool = True) -> Path:
    """``fleet.db`` under ``home`` (default ``TRAINCTL_HOME``, created unless ``create`` is
    False, for a command that only reads)."""
    from orchestrator.contracts.paths import trainctl_home

    return (home or trainctl_home(create=create)) / FLEET_FILE


def fleet_store(home: Path | None = None, *, create: bool = True) -> StoreRef:
    """The store of the fleet under ``home`` (default ``TRAINCTL_HOME``): ``TRAINCTL_STORE``,
    else the URL ``fleet init --store`` wrote to ``home/store``, else ``home/fleet.db``."""
    from orchestrator.contracts.paths import trainctl_home

    return resolve_store(home or trainctl_home(create=create))


def store_exists(ref: StoreRef) -> bool:
    """Whether a fleet store is there to open: a SQLite file that exists, or any PostgreSQL
    URL (opening it says whether it holds a fleet)."""
    return is_url(ref) or Path(ref).exists()


def open_fleet(home: Path | None = None, *, read_only: bool = False) -> FleetBackend:
    """The fleet under ``TRAINCTL_HOME`` (in its store, ``fleet_store``); FileNotFoundError if
    none was initialised.

    A fleet initialised with ``--backend slurm`` opens as the Slurm backend; either way the
    caller sees only the ``FleetBackend`` Protocol, so every command works on either unchanged.
    ``read_only``: a command that only reads, which must work on a read-only or immutable
    file and never creates ``TRAINCTL_HOME``.
    """
    ref = fleet_store(home, create=not read_only)
    if _is_slurm(ref):
        from orchestrator.fleet.slurm import SlurmFleet

        return SlurmFleet(ref)
    return SqliteFleet(ref, read_only=read_only)


def create_fleet(
    path: StoreRef,
    preset: Preset,
    seed: int,
    speed: float,
    wall: datetime | None = None,
    force: bool = True,
) -> FleetBackend:
    """Build a simulated fleet from ``preset`` at ``path`` (a SQLite file or a PostgreSQL URL,
    atomically) and open it."""
    return SqliteFleet.create(path, preset, seed, speed, wall, force)


def create_slurm_fleet(
    path: StoreRef,
    members: Sequence[tuple[Path, SlurmBackendConfig, Path | None]],
    force: bool = True,
) -> FleetBackend:
    """Record every node of the configured partitions of each Slurm cluster (its
    ``slurm.conf``, its backend config and that config's file) at ``path``: one fleet of
    several clusters, each with its own controller."""
    from orchestrator.fleet.slurm import SlurmFleet

    (conf, config, config_path), *more = members
    return SlurmFleet.create(path, conf, config, config_path, more=more, force=force)


def _is_slurm(ref: StoreRef) -> bool:
    from orchestrator.fleet.slurm.store import BACKEND, backend_of

    return (is_url(ref) or Path(ref).is_file()) and backend_of(ref) == BACKEND


def open_backend(path: StoreRef) -> FleetBackend:
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
    "FLEET_FILE",
    "FleetBackend",
    "SqliteFleet",
    "StoreRef",
    "create_fleet",
    "create_slurm_fleet",
    "fleet_path",
    "fleet_store",
    "store_exists",
    "open_backend",
    "open_fleet",
]
