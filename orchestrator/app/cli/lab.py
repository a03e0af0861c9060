"""``trainctl lab``: local practice clusters (today: a real Slurm cluster on this machine)."""

from __future__ import annotations

import click

from orchestrator.app.cli.common import BadInput, emit, handle_errors, json_option


@click.group("lab")
def lab() -> None:
    """Real local clusters to try trainctl against (under TRAINCTL_HOME)."""


@lab.group("slurm")
def slurm() -> None:
    """A Slurm cluster on loopback: one slurmctld, one slurmd per node, a private munged."""


@slurm.command("up")
@click.option(
    "--nodes",
    type=click.IntRange(1, 64),
    default=None,
    help="Nodes of a new lab (default 16); a running lab of another size is refused.",
)
@json_option
@handle_errors
def up(nodes: int | None, as_json: bool) -> None:
    """Start the lab (or report the one running, saying so): prints slurm_conf, cluster and
    nodes. Asking for another size than the running lab's is refused (exit 2, field nodes):
    `lab slurm down` first."""
    from orchestrator.contracts.paths import trainctl_home
    from orchestrator.lab.slurm import lab_running, lab_up

    home = trainctl_home()
    running = lab_running(home)
    if running is not None and nodes is not None and nodes != len(running.nodes):
        raise BadInput(
            f"nodes: a lab of {len(running.nodes)} nodes already runs; `trainctl lab slurm "
            f"down` first to start one of {nodes}",
            field="nodes",
        )
    info = running if running is not None else lab_up(home, nodes or 16)
    emit(
        {**info.to_json(), "already_running": running is not None},
        as_json,
        lambda o: click.echo(
            f"Slurm lab {o['cluster']}: {len(o['nodes'])} nodes"
            + (" (already running)" if o["already_running"] else "")
            + f", SLURM_CONF={o['slurm_conf']}\n"
            f"  trainctl fleet init --backend slurm --slurm-conf {o['slurm_conf']} "
            f"--backend-config {o['backend_config']}"
        ),
    )


@slurm.command("down")
@json_option
@handle_errors
def down(as_json: bool) -> None:
    """Stop exactly what `up` started (its daemons and the jobs they ran)."""
    from orchestrator.contracts.paths import trainctl_home
    from orchestrator.lab.slurm import lab_down

    stopped = lab_down(trainctl_home())
    emit(
        {"stopped": stopped},
        as_json,
        lambda o: click.echo(f"stopped {len(o['stopped'])} process(es)"),
    )


COMMANDS = [lab]
