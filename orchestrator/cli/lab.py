"""``trainctl lab``: local practice clusters (today: a real Slurm cluster on this machine)."""

from __future__ import annotations

import click

from orchestrator.cli.common import emit, handle_errors, json_option


@click.group("lab")
def lab() -> None:
    """Real local clusters to try trainctl against (under TRAINCTL_HOME)."""


@lab.group("slurm")
def slurm() -> None:
    """A Slurm cluster on loopback: one slurmctld, one slurmd per node, a private munged."""


@slurm.command("up")
@click.option("--nodes", type=click.IntRange(1, 64), default=16, show_default=True)
@json_option
@handle_errors
def up(nodes: int, as_json: bool) -> None:
    """Start the lab (or report the one running): prints slurm_conf, cluster and nodes."""
    from orchestrator.lab.slurm import lab_up
    from orchestrator.paths import trainctl_home

    info = lab_up(trainctl_home(), nodes)
    emit(
        info.to_json(),
        as_json,
        lambda o: click.echo(
            f"Slurm lab {o['cluster']}: {len(o['nodes'])} nodes, SLURM_CONF={o['slurm_conf']}\n"
            f"  trainctl fleet init --backend slurm --slurm-conf {o['slurm_conf']} "
            f"--backend-config {o['backend_config']}"
        ),
    )


@slurm.command("down")
@json_option
@handle_errors
def down(as_json: bool) -> None:
    """Stop exactly what `up` started (its daemons and the jobs they ran)."""
    from orchestrator.lab.slurm import lab_down
    from orchestrator.paths import trainctl_home

    stopped = lab_down(trainctl_home())
    emit(
        {"stopped": stopped},
        as_json,
        lambda o: click.echo(f"stopped {len(o['stopped'])} process(es)"),
    )


COMMANDS = [lab]
