"""``trainctl lab``: local practice clusters (today: a real Slurm cluster on this machine)."""

from __future__ import annotations

from typing import Any

import click

from orchestrator.app.cli.common import BadInput, emit, handle_errors, json_option
from orchestrator.lab.slurm_files import CLUSTER


@click.group("lab")
def lab() -> None:
    """Real local clusters to try trainctl against (under TRAINCTL_HOME)."""


@lab.group("slurm")
def slurm() -> None:
    """A Slurm cluster on loopback: one slurmctld, one slurmd per node, a private munged."""


def _name_option(f: Any) -> Any:
    return click.option(
        "--name",
        default=CLUSTER,
        show_default=True,
        help="The lab's name: its Slurm ClusterName and its nodes' prefix. Labs of different "
        "names run side by side (several Slurm clusters of one fleet).",
    )(f)


def _checked_name(name: str) -> str:
    from orchestrator.lab.slurm import check_name

    try:
        return check_name(name)
    except ValueError as err:
        raise BadInput(str(err), field="name") from None


@slurm.command("up")
@_name_option
@click.option(
    "--nodes",
    type=click.IntRange(1, 64),
    default=None,
    help="Nodes of a new lab (default 16); a running lab of another size is refused.",
)
@click.option(
    "--bad-version",
    "bad_versions",
    multiple=True,
    metavar="COMPONENT=VERSION[:RATE]",
    help="A bad build: it installs, then a share RATE of the nodes that get it (1.0 when left "
    "out) fail the lab's health check until another version replaces it, so a bad build can "
    "be rolled out and caught. Repeatable; on a running lab it replaces the list from the "
    "next install on.",
)
@click.option(
    "--racks",
    type=click.IntRange(0, 64),
    default=0,
    show_default=True,
    help="Split a new lab's nodes into this many racks (leaf switches of one zone) in a "
    "topology.conf (topology/tree), which trainctl reads racks and zones from.",
)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    metavar="NAME=HOSTLIST",
    help="A new lab's extra Slurm partition of those nodes (every node stays in main), e.g. "
    "gpu=h[01-04]. Repeatable.",
)
@click.option(
    "--feature",
    "features",
    multiple=True,
    metavar="HOSTLIST=FEATURE[,FEATURE]",
    help="Static node features of a new lab's nodes (slurm.conf Features=), e.g. "
    "h[05-08]=a100. Repeatable.",
)
@json_option
@handle_errors
def up(
    name: str,
    nodes: int | None,
    bad_versions: tuple[str, ...],
    racks: int,
    partitions: tuple[str, ...],
    features: tuple[str, ...],
    as_json: bool,
) -> None:
    """Start the lab (or report the one running, saying so): prints slurm_conf, cluster and
    nodes. Asking for another size than the running lab's is refused (exit 2, field nodes):
    `lab slurm down` first."""
    from orchestrator.contracts.paths import trainctl_home
    from orchestrator.lab.slurm import lab_running, lab_up, set_bad_versions
    from orchestrator.lab.slurm_files import parse_bad_version

    name = _checked_name(name)
    try:
        bad = [parse_bad_version(b) for b in bad_versions]
    except ValueError as err:
        raise BadInput(str(err), field="bad_version") from None
    home = trainctl_home()
    running = lab_running(home, name)
    if running is not None and nodes is not None and nodes != len(running.nodes):
        raise BadInput(
            f"nodes: a lab of {len(running.nodes)} nodes already runs; `trainctl lab slurm "
            f"down{_named(name)}` first to start one of {nodes}",
            field="nodes",
        )
    if running is None:
        if racks > (nodes or 16):
            raise BadInput(f"racks: {racks} racks of {nodes or 16} nodes", field="racks")
        try:
            info = lab_up(home, nodes or 16, name, bad, racks, list(partitions), list(features))
        except ValueError as err:
            field = str(err).partition(":")[0]
            if field not in ("partition", "feature"):
                raise
            raise BadInput(str(err), field=field) from None
    else:
        info = set_bad_versions(home, name, bad) if bad_versions else running
    emit(
        {**info.to_json(), "already_running": running is not None},
        as_json,
        lambda o: click.echo(
            f"Slurm lab {o['cluster']}: {len(o['nodes'])} nodes"
            + (" (already running)" if o["already_running"] else "")
            + f", SLURM_CONF={o['slurm_conf']}\n"
            + "".join(
                f"  bad build: {c}={v} makes {r:.0%} of the nodes unhealthy\n"
                for c, v, r in o["bad_versions"]
            )
            + f"  trainctl fleet init --backend slurm --slurm-conf {o['slurm_conf']} "
            f"--backend-config {o['backend_config']}"
        ),
    )


def _named(name: str) -> str:
    return "" if name == CLUSTER else f" --name {name}"


@slurm.command("down")
@_name_option
@json_option
@handle_errors
def down(name: str, as_json: bool) -> None:
    """Stop exactly what `up` started (its daemons and the jobs they ran); other labs keep
    running."""
    from orchestrator.contracts.paths import trainctl_home
    from orchestrator.lab.slurm import lab_down

    stopped = lab_down(trainctl_home(), _checked_name(name))
    emit(
        {"stopped": stopped},
        as_json,
        lambda o: click.echo(f"stopped {len(o['stopped'])} process(es)"),
    )


COMMANDS = [lab]
