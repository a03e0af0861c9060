"""``trainctl fleet init --backend slurm``: record a real Slurm cluster under TRAINCTL_HOME."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli.common import BadInput, emit
from orchestrator.cli.fleet_replace import make_room


def init_slurm(
    slurm_conf: str | None, backend_config: str | None, force: bool, as_json: bool
) -> None:
    """Read the cluster's nodes through Slurm and record them with the config's versions."""
    from orchestrator.fleet import fleet_path
    from orchestrator.fleet.slurm import SlurmFleet
    from orchestrator.fleet.slurm.config import load_backend_config

    if not slurm_conf:
        raise BadInput("slurm_conf: required with --backend slurm", field="slurm_conf")
    conf = Path(slurm_conf)
    if not conf.is_file():
        raise BadInput(f"slurm_conf: no such file {conf}", field="slurm_conf")
    cfg_path = Path(backend_config) if backend_config else None
    config = load_backend_config(cfg_path)
    path = fleet_path()
    backup = make_room(path, force)  # never under a live worker; the old file kept aside
    fleet = SlurmFleet.create(path, conf, config, cfg_path)
    try:
        out = {
            "path": str(path),
            "backup": None if backup is None else str(backup),
            "backend": "slurm",
            "slurm_conf": str(conf.resolve()),
            "cluster": fleet.cluster_name,
            "hosts_total": fleet.hosts_in(fleet.cluster_name),
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
