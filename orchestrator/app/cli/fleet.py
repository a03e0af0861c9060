"""``trainctl fleet``: create and inspect the simulated fleet."""

from __future__ import annotations

import os
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from orchestrator.app.cli import fleet_migrate
from orchestrator.app.cli.common import (
    BadInput,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
)
from orchestrator.app.cli.fleet_host import host
from orchestrator.app.cli.fleet_replace import make_room
from orchestrator.contracts.breaker_types import DEFAULT_MAX_FAILURES, BreakerSettings
from orchestrator.contracts.paths import trainctl_home
from orchestrator.contracts.ui_text import duration, plural
from orchestrator.fleet import create_fleet, fleet_store
from orchestrator.fleet.presets import PRESETS, get_preset
from orchestrator.fleet.settings import MAX_SEED, MAX_SPEED_FACTOR, parse_speed
from orchestrator.fleet.status import fleet_status
from orchestrator.fleet.store_url import STORE_FILE, StoreRef, check_store_url, describe, is_url


@click.group("fleet")
def fleet() -> None:
    """Create and inspect the simulated GPU fleet under TRAINCTL_HOME."""


@fleet.command("init")
@click.option(
    "--backend",
    type=click.Choice(["sim", "slurm"]),
    default="sim",
    show_default=True,
    help="The simulated fleet, or a real Slurm cluster (--slurm-conf).",
)
@click.option("--preset", default=None, help=f"Fleet shape (sim): {', '.join(PRESETS)}.")
@click.option(
    "--slurm-conf",
    "slurm_confs",
    multiple=True,
    help="slurm.conf of a cluster (slurm); repeat it for a fleet of several clusters, each "
    "with its own controller and ClusterName.",
)
@click.option(
    "--backend-config",
    "backend_configs",
    multiple=True,
    help="Hooks, health command, naming (slurm): one for every cluster, or one per "
    "--slurm-conf, in the same order.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, MAX_SEED),
    default=1,
    show_default=True,
    help="Seed of every random draw.",
)
@click.option(
    "--speed",
    default="3600",
    show_default=True,
    help=f"Fleet time per wall time, up to {MAX_SPEED_FACTOR:g}, or 'max' (the fastest).",
)
@click.option("--force", is_flag=True, help="Replace an existing fleet.")
@click.option(
    "--breaker-max-failures",
    type=click.IntRange(1, 1_000_000),
    default=DEFAULT_MAX_FAILURES,
    show_default=True,
    help="Circuit breaker (sim): failed hosts a cluster's window tolerates; one more pauses "
    "its trains and operations (Slurm: the backend config's breaker).",
)
@click.option(
    "--breaker-window",
    default="6h",
    show_default=True,
    help="Circuit breaker (sim): the sliding window of fleet time the failures are counted in.",
)
@click.option(
    "--store",
    default=None,
    metavar="URL",
    help="Keep the fleet's record in PostgreSQL (postgresql://USER@HOST:PORT/DB, no password: "
    "PGPASSWORD, ~/.pgpass or PGPASSFILE) for workers on many machines; written to "
    "TRAINCTL_HOME/store. Default: TRAINCTL_STORE, that file, else TRAINCTL_HOME/fleet.db.",
)
@json_option
@handle_errors
def init(
    backend: str,
    preset: str | None,
    slurm_confs: tuple[str, ...],
    backend_configs: tuple[str, ...],
    seed: int,
    speed: str,
    force: bool,
    breaker_max_failures: int,
    breaker_window: str,
    store: str | None,
    as_json: bool,
) -> None:
    """Build a fleet from a preset, or record a Slurm cluster (atomically: a failed init
    leaves nothing behind)."""
    target = init_store(store)
    if backend == "slurm":
        from orchestrator.app.cli.fleet_slurm import init_slurm

        init_slurm(slurm_confs, backend_configs, force, as_json, target)
        return
    if preset is None:
        raise BadInput("preset: required for the simulated fleet (--preset)", field="preset")
    shape = get_preset(preset)
    factor = parse_speed(speed)
    breaker = _breaker(breaker_max_failures, breaker_window)
    backup = make_room(target, force)  # never under a live worker; the old file kept aside
    f = create_fleet(target, shape, seed, factor, force=force)  # refused if one came meanwhile
    remember_store(target)
    _keep_breaker(target, breaker)
    out = {
        "path": str(target),
        "store": describe(target),
        "backup": None if backup is None else str(backup),
        "preset": shape.name,
        "seed": seed,
        "speed": speed,
        "hosts_total": shape.hosts_total,
        "gpus_total": shape.gpus_total,
        "clusters": shape.clusters,
    }
    f.close()
    emit(
        out,
        as_json,
        lambda o: click.echo(
            f"fleet {o['preset']}: {plural(o['clusters'], 'cluster')}, {o['hosts_total']:,} hosts, "
            f"{o['gpus_total']:,} GPUs at {o['path']}"
            + (f" (the replaced fleet kept at {o['backup']})" if o["backup"] else "")
        ),
    )


def _breaker(max_failures: int, window: str) -> BreakerSettings:
    try:
        return BreakerSettings.model_validate({"max_failures": max_failures, "window": window})
    except ValidationError as err:
        raise BadInput(
            f"breaker_window: {err.errors()[0]['msg']}", field="breaker_window"
        ) from None


def _keep_breaker(target: StoreRef, settings: BreakerSettings) -> None:
    from orchestrator.fleet.breaker_store import set_breaker_settings
    from orchestrator.fleet.ledger_files import open_store

    db = open_store(target)
    try:
        set_breaker_settings(db, settings)
    finally:
        db.close()


def init_store(store: str | None) -> StoreRef:
    """Where ``fleet init`` builds the fleet: ``--store`` (checked: exit 2 naming ``store``
    for a URL with a password, never repeating it), else the store commands resolve."""
    if store is not None:
        return check_store_url(store)
    return fleet_store()


def remember_store(target: StoreRef) -> None:
    """A PostgreSQL store is written to ``TRAINCTL_HOME/store`` (atomically), so every command
    and the worker of this home find it; a SQLite fleet under the home needs no file."""
    if not is_url(target):
        return
    home = trainctl_home()
    tmp = home / f".{STORE_FILE}.tmp"
    tmp.write_text(f"{target}\n", encoding="utf-8")
    os.replace(tmp, home / STORE_FILE)


def _print_status(o: dict[str, Any]) -> None:
    con = Console()
    con.print(
        f"[bold]{o['preset']}[/] at fleet hour {o['fleet_hours']}: {o['hosts_total']:,} hosts, "
        f"{o['gpus_total']:,} GPUs, {plural(o['jobs_running'], 'job')}, "
        f"utilisation {o['utilisation']:.1%}"
    )
    con.print(_clock_line(o), soft_wrap=True)
    t = Table("state", "hosts")
    for state, n in o["states"].items():
        t.add_row(state, f"{n:,}")
    con.print(t)
    v = Table("component", "versions (hosts)")
    for comp, vers in o["versions"].items():
        v.add_row(comp, ", ".join(f"{ver} ({n:,})" for ver, n in vers.items()))
    con.print(v)


def _clock_line(o: dict[str, Any]) -> str:
    """What the fleet hour above means: a scaled clock keeps running with no train working,
    so the hour is not when the last cycle ended (that is said, when recorded)."""
    clock = o.get("clock") or {}
    if clock.get("runs_on"):
        speed = o["speed"]
        line = (
            f"the fleet clock keeps running ({speed:g} fleet seconds per wall second), "
            "whether or not a train is working"
        )
    else:
        line = "the fleet clock moves only as trains and operations advance it"
    ended = clock.get("last_train_ended")
    if ended:
        ago = o["fleet_hours"] - ended["fleet_hours"]
        line += (
            f"; the last train to end, {ended['train']}, ended at fleet hour "
            f"{ended['fleet_hours']:.1f} ({duration(ago)} ago)"
        )
    return line


@fleet.command("status")
@click.option("--cluster", default=None, help="Only this cluster.")
@json_option
@handle_errors
def status(cluster: str | None, as_json: bool) -> None:
    """Hosts by state, versions per component, jobs and utilisation."""
    f = open_fleet_or_fail(read_only=True)  # reads only: works on a read-only file
    try:
        out = fleet_status(f, cluster)
        out["store"] = describe(fleet_store(create=False))
        emit(out, as_json, _print_status)
    finally:
        f.close()


@fleet.command("inject-fault")
@click.option("--cluster", required=True)
@click.option("--component", required=True)
@click.option("--version", "version", required=True)
@click.option(
    "--rate",
    type=click.FloatRange(0.0, 1.0),
    default=1.0,
    show_default=True,
    help="Probability that a host installing this build comes back bad.",
)
@json_option
@handle_errors
def inject_fault(cluster: str, component: str, version: str, rate: float, as_json: bool) -> None:
    """Declare a bad build, so verification and halting can be exercised (tests, game days)."""
    from orchestrator.contracts.models import Component, check_targets

    if component not in {c.value for c in Component}:
        known = ", ".join(c.value for c in Component)
        raise BadInput(f"component: unknown component {component!r} (known: {known})")
    try:
        version = check_targets({component: version}, allow_upper=True)[component]
    except ValueError as err:
        raise BadInput(f"version: {err}", field="version") from None
    f = open_fleet_or_fail()
    try:
        with f.cluster(cluster) as sim:
            sim.inject_fault(component, version, rate, "operator")
    finally:
        f.close()
    emit(
        {"cluster": cluster, "component": component, "version": version, "rate": rate},
        as_json,
        lambda o: click.echo(
            f"{o['component']}={o['version']} on {o['cluster']} now leaves hosts bad "
            f"with p={o['rate']}"
        ),
    )


fleet.add_command(host)
fleet.add_command(fleet_migrate.migrate)

COMMANDS = [fleet]
