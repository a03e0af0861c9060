"""``trainctl fleet init --backend slurm``: record real Slurm clusters under TRAINCTL_HOME."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator.app.cli.common import BadInput, OperationFailed, emit
from orchestrator.app.cli.fleet_replace import make_room

if TYPE_CHECKING:
    from orchestrator.contracts.backend import FleetBackend
    from orchestrator.fleet.slurm.config import SlurmBackendConfig
    from orchestrator.fleet.store_url import StoreRef


def init_slurm(
    slurm_confs: Sequence[str],
    backend_configs: Sequence[str],
    force: bool,
    as_json: bool,
    path: StoreRef,
) -> None:
    """Read each cluster's nodes through Slurm and record them with its config's versions
    in the store ``path`` (a SQLite file or a PostgreSQL URL)."""
    from orchestrator.app.cli.fleet import remember_store
    from orchestrator.fleet import create_slurm_fleet
    from orchestrator.fleet.slurm.conf_check import ControllerNotAnswering, check_conf

    confs = _read_confs(slurm_confs, backend_configs)
    paths: list[Path | None] = [Path(b) for b in backend_configs] or [None]
    if len(paths) == 1:
        paths = paths * len(confs)
    members = [(conf, _config(p), p) for conf, p in zip(confs, paths, strict=True)]
    for conf in confs:
        try:
            check_conf(conf)  # a controller configured, and answering
        except ControllerNotAnswering as err:
            raise OperationFailed(str(err), field="slurm_conf") from None
    backup = make_room(path, force)  # never under a live worker; the old file kept aside
    fleet = create_slurm_fleet(path, members)
    remember_store(path)
    try:
        out = _describe_fleet(fleet, path, backup, confs)
    finally:
        fleet.close()
    emit(
        out,
        as_json,
        lambda o: click.echo(
            f"fleet on Slurm cluster{'s' if len(o['clusters']) > 1 else ''} "
            f"{', '.join(o['clusters'])}: {o['hosts_total']} nodes at {o['path']}"
        ),
    )


def _read_confs(slurm_confs: Sequence[str], backend_configs: Sequence[str]) -> list[Path]:
    """Each ``--slurm-conf`` as a readable file, checked against the count of backend configs."""
    from orchestrator.fleet.slurm.conf_check import read_conf

    if not slurm_confs:
        raise BadInput("slurm_conf: required with --backend slurm", field="slurm_conf")
    if len(backend_configs) > 1 and len(backend_configs) != len(slurm_confs):
        raise BadInput(
            f"backend_config: {len(backend_configs)} given for {len(slurm_confs)} clusters; "
            "give one for all, or one per --slurm-conf in the same order",
            field="backend_config",
        )
    confs = []
    for slurm_conf in slurm_confs:
        conf = Path(slurm_conf)
        if not conf.is_file():
            raise BadInput(f"slurm_conf: no such file {conf}", field="slurm_conf")
        read_conf(conf)  # text, before anything else reads it
        confs.append(conf)
    return confs


def _describe_fleet(
    fleet: FleetBackend, path: StoreRef, backup: Path | None, confs: list[Path]
) -> dict[str, Any]:
    """The command's output: where the new fleet is stored and each cluster's nodes."""
    from orchestrator.fleet.store_url import describe

    clusters = fleet.cluster_names()
    return {
        "path": str(path),
        "store": describe(path),
        "backup": None if backup is None else str(backup),
        "backend": "slurm",
        "slurm_conf": str(confs[0].resolve()),
        "cluster": clusters[0],
        "clusters": {
            c: {"slurm_conf": str(conf.resolve()), "hosts_total": fleet.hosts_in(c)}
            for c, conf in zip(clusters, confs, strict=True)
        },
        "hosts_total": sum(fleet.hosts_in(c) for c in clusters),
        "speed": fleet.speed,
    }


def _config(cfg_path: Path | None) -> SlurmBackendConfig:
    """The backend config at ``cfg_path`` (defaults when None); its own field under
    ``backend_config`` when it is wrong."""
    from orchestrator.contracts.specs import SpecError
    from orchestrator.fleet.slurm.config import load_backend_config

    try:
        return load_backend_config(cfg_path)
    except SpecError as err:  # the backend config's own field, under backend_config
        field = f"backend_config.{err.field}" if err.field else "backend_config"
        message = err.message
        if err.field and message.startswith(f"{err.field}:"):
            message = f"backend_config.{message}"
        elif not message.startswith("backend_config"):
            message = f"backend_config: {message}"
        raise BadInput(message, field=field) from None
