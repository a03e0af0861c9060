"""``trainctl fleet init --backend slurm``: record a real Slurm cluster under TRAINCTL_HOME."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app.cli.common import BadInput, OperationFailed, emit
from orchestrator.app.cli.fleet_replace import make_room


def init_slurm(
    slurm_conf: str | None, backend_config: str | None, force: bool, as_json: bool
) -> None:
    """Read the cluster's nodes through Slurm and record them with the config's versions."""
    from orchestrator.contracts.specs import SpecError
    from orchestrator.fleet import create_slurm_fleet, fleet_path
    from orchestrator.fleet.slurm.conf_check import ControllerNotAnswering, check_conf, read_conf
    from orchestrator.fleet.slurm.config import load_backend_config

    if not slurm_conf:
        raise BadInput("slurm_conf: required with --backend slurm", field="slurm_conf")
    conf = Path(slurm_conf)
    if not conf.is_file():
        raise BadInput(f"slurm_conf: no such file {conf}", field="slurm_conf")
    read_conf(conf)  # text, before anything else reads it
    cfg_path = Path(backend_config) if backend_config else None
    try:
        config = load_backend_config(cfg_path)
    except SpecError as err:  # the backend config's own field, under backend_config
        field = f"backend_config.{err.field}" if err.field else "backend_config"
        message = err.message
        if err.field and message.startswith(f"{err.field}:"):
            message = f"backend_config.{message}"
        elif not message.startswith("backend_config"):
            message = f"backend_config: {message}"
        raise BadInput(message, field=field) from None
    try:
        check_conf(conf)  # a controller configured, and answering
    except ControllerNotAnswering as err:
        raise OperationFailed(str(err), field="slurm_conf") from None
    path = fleet_path()
    backup = make_room(path, force)  # never under a live worker; the old file kept aside
    fleet = create_slurm_fleet(path, conf, config, cfg_path)
    try:
        (cluster,) = fleet.cluster_names()  # a Slurm fleet records one cluster
        out = {
            "path": str(path),
            "backup": None if backup is None else str(backup),
            "backend": "slurm",
            "slurm_conf": str(conf.resolve()),
            "cluster": cluster,
            "hosts_total": fleet.hosts_in(cluster),
            "speed": fleet.speed,
        }
    finally:
        fleet.close()
    emit(
        out,
        as_json,
        lambda o: click.echo(
            f"fleet on Slurm cluster {o['cluster']}: {o['hosts_total']} nodes at {o['path']}"
        ),
    )
