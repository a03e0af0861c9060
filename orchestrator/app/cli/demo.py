"""``trainctl demo``: server, worker, fleet and a train, in one command.

The demo itself runs in ``orchestrator.app.demo``; this module parses its options and shows it to a
person: the train's page in the Temporal UI, a progress bar on stderr, and the summary.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from orchestrator.app.cli.common import emit, fail, handle_errors, json_option
from orchestrator.app.cli.fleet_replace import make_room
from orchestrator.contracts.train_types import TrainStatus
from orchestrator.contracts.ui_text import duration, explain_wait, plural
from orchestrator.fleet.presets import PRESETS, get_preset
from orchestrator.fleet.settings import parse_speed
from orchestrator.train.status import visit_figures

#: Seconds between two plain progress lines when stderr is not a terminal.
PLAIN_EVERY = 10.0


class _CycleBar:
    """The trains' visit cycle as a progress bar on stderr, from the UI's address to their stop."""

    def __init__(self, total: int, trains: int = 1) -> None:
        self.console = Console(stderr=True)
        self.total = total
        self.trains = trains
        self.latest: dict[str, TrainStatus] = {}
        self.progress = Progress(
            TextColumn("[bold]cycle"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=self.console,
        )
        self.task = self.progress.add_task("starting", total=total)
        #: Not a terminal (a log file, CI): plain lines every PLAIN_EVERY seconds, no bar.
        self.plain = not self.console.is_terminal
        self.last_line = -PLAIN_EVERY

    def ui(self, url: str) -> None:
        self.console.print(f"Temporal UI: [link={url}]{url}[/link]")
        if not self.plain:
            self.progress.start()

    def status(self, status: TrainStatus) -> None:
        self.latest[status.cluster] = status
        trains = list(self.latest.values())
        figures = [visit_figures(s) for s in trains]
        visited, out = sum(v for v, _ in figures), sum(o for _, o in figures)
        done = visited + out  # the bar: hosts settled this cycle
        why = (
            f"; waiting: {explain_wait(status.waiting)}"
            if status.waiting and len(trains) == 1
            else ""
        )
        hours = "/".join(f"{s.fleet_hours:.1f}" for s in trains)  # each cluster's own clock
        ended = [s for s in trains if s.state in ("stopped", "halted")]
        if self.plain:
            now = time.monotonic()
            if now - self.last_line >= PLAIN_EVERY or len(ended) == self.trains:
                self.last_line = now
                click.echo(
                    f"cycle: {visited}/{self.total} hosts visited, "
                    f"{sum(s.in_maintenance for s in trains)} in maintenance, "
                    f"{out} quarantined or in repair, fleet hour {hours}{why}",
                    err=True,
                )
            return
        self.progress.update(
            self.task,
            completed=done,
            description=f"{sum(s.in_maintenance for s in trains)} in maintenance, "
            f"{out} quarantined or in repair, fleet h {hours}{why}",
        )
        if len(ended) == self.trains:
            self.progress.stop()


def _print(o: dict[str, Any]) -> None:
    click.echo(
        f"{o['preset']}: {o['hosts_visited']}/{o['hosts_total']} hosts visited, "
        f"{o['hosts_quarantined']} quarantined or in repair, "
        f"{plural(o['hosts_lost'], 'host')} lost (out of service with no owner), "
        f"{plural(o['budget_violations'], 'budget violation')}, "
        f"{plural(o['job_interruptions'], 'job interruption')} "
        f"({o['lost_gpu_hours']:,.1f} GPU-hours of work lost); "
        f"cycle took {duration(o['cycle_fleet_hours'])} of fleet time in "
        f"{duration(o['cycle_wall_seconds'] / 3600)}. "
        f"Audit {'ok' if o['audit_ok'] else 'FAILED'}. Fleet kept at {o['fleet']}."
    )
    if o.get("interrupted"):
        click.echo(f"Interrupted by {o['interrupted']}: the train stopped, its hosts handed back.")
    clusters = o.get("clusters", {})
    for name, c in clusters.items() if len(clusters) > 1 else ():
        click.echo(
            f"  {name}: {c['hosts_visited']}/{c['hosts_total']} visited, "
            f"{c['hosts_quarantined']} quarantined or in repair, "
            f"{plural(c['job_interruptions'], 'job interruption')}, "
            f"{c['lost_gpu_hours']} GPU-h lost; "
            f"its clock at fleet hour {c['fleet_hours']}"
        )


@click.command("demo")
@click.option("--preset", default="small", show_default=True, help=", ".join(PRESETS))
@click.option(
    "--speed",
    default="3600",
    show_default=True,
    help="Fleet seconds per wall second, or 'max' (1e6, the fastest).",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--until-cycle-complete", is_flag=True, help="Stop cleanly after one full visit cycle."
)
@click.option(
    "--clusters",
    type=int,
    default=1,
    show_default=True,
    help="Run a train on each of the first N clusters at once.",
)
@click.option("--domain-size", type=int, default=None, help="Hosts in maintenance at once.")
@click.option("--budget", default="10%", show_default=True, help="Max hosts out of service.")
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="COMPONENT=VERSION",
    help="Update this instead of the demo's targets (repeatable; switch_firmware: rack switches).",
)
@click.option(
    "--campaign",
    is_flag=True,
    help="Roll a good kernel through every cluster, stage by stage (preset multi unless told).",
)
@click.option("--port", type=int, default=7233, show_default=True)
@click.option("--ui-port", type=int, default=8233, show_default=True)
@click.option(
    "--force", is_flag=True, help="Replace the fleet of TRAINCTL_HOME if there is one already."
)
@json_option
@handle_errors
def demo(
    preset: str,
    speed: str,
    seed: int,
    until_cycle_complete: bool,
    clusters: int,
    domain_size: int | None,
    budget: str,
    targets: tuple[str, ...],
    campaign: bool,
    port: int,
    ui_port: int,
    force: bool,
    as_json: bool,
) -> None:
    """Run a maintenance train on a fresh simulated fleet, with the Temporal UI.

    The demo builds its fleet in TRAINCTL_HOME; like `fleet init`, it refuses to replace one
    that is there (another fleet's state and record would be lost) unless given --force.
    """
    from orchestrator.app.demo import run_demo
    from orchestrator.fleet import fleet_path

    _check_ports(port, ui_port)  # before anything is written
    # Like `fleet init`: never under a live worker, and the replaced fleet is kept aside.
    make_room(fleet_path(), force, hint=" (or point TRAINCTL_HOME elsewhere)")

    factor = parse_speed(speed)
    if campaign:
        from orchestrator.app.cli.demo_campaign import run

        run("multi" if preset == "small" else preset, factor, seed, port, ui_port, as_json)
        return
    shape = get_preset(preset)
    _check_train_shape(preset, shape.hosts_per_cluster, shape.clusters, domain_size, clusters)
    bar = _CycleBar(shape.hosts_per_cluster * clusters, clusters)
    try:
        out = asyncio.run(
            run_demo(
                preset,
                factor,
                seed,
                until_cycle_complete,
                domain_size,
                budget,
                port,
                ui_port,
                on_ui=bar.ui,
                on_status=bar.status,
                clusters=clusters,
                targets=_targets(targets),
            )
        )
    except (KeyboardInterrupt, asyncio.CancelledError):  # a second SIGINT/SIGTERM: at once
        fail("interrupted")
    finally:
        bar.progress.stop()
    emit(out, as_json, _print)
    _exit_for_outcome(out, until_cycle_complete)


COMMANDS = [demo]


def _check_ports(port: int, ui_port: int) -> None:
    """Refuse a port out of range, or the UI on the server's own port."""
    for name, value in (("port", port), ("ui_port", ui_port)):
        if not 0 <= value <= 65535:
            raise click.BadParameter("must be a port from 0 (any free) to 65535", param_hint=name)
    if port == ui_port and port != 0:
        raise click.BadParameter(f"must differ from --port ({port})", param_hint="ui_port")


def _check_train_shape(
    preset: str,
    hosts_per_cluster: int,
    preset_clusters: int,
    domain_size: int | None,
    clusters: int,
) -> None:
    """Refuse a domain size or a count of clusters the preset's fleet cannot hold."""
    if domain_size is not None and domain_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="domain_size")
    if domain_size is not None and domain_size > hosts_per_cluster:
        raise click.BadParameter(
            f"at most the {hosts_per_cluster} hosts of a {preset} cluster",
            param_hint="domain_size",
        )
    if not 1 <= clusters <= preset_clusters:
        raise click.BadParameter(
            f"must be from 1 to {preset_clusters} (the clusters of {preset})", param_hint="clusters"
        )


def _exit_for_outcome(out: dict[str, Any], until_cycle_complete: bool) -> None:
    """Fail (exit 1) when the demo's run did not end as asked or its audit found a fault."""
    if out.get("interrupted"):  # stopped as asked: the trains handed everything back
        if not out["audit_ok"]:
            raise click.exceptions.Exit(1)
        return
    if until_cycle_complete and out["cycles_completed"] < 1:
        fail(f"the train stopped before completing a cycle: {out['train_reason']}")
    if not out["audit_ok"]:
        fail("the fleet's audit found broken invariants (run `trainctl audit`)")


def _targets(pairs: tuple[str, ...]) -> dict[str, str] | None:
    """``COMPONENT=VERSION`` options as a target mapping (None: the demo's own targets)."""
    out: dict[str, str] = {}
    for pair in pairs:
        comp, sep, version = pair.partition("=")
        if not sep or not comp.strip():
            raise click.BadParameter(f"{pair!r} is not COMPONENT=VERSION", param_hint="target")
        out[comp.strip()] = version.strip()
    return out or None
