"""``trainctl report``: what maintenance cost the jobs over a window, per owner and part.

Read from the fleet's durable record by the live ledger (``telemetry.cost_ledger``), which runs
the simulator's cost code: ``--since 7d`` is the last 7 days of fleet time.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from orchestrator.app.cli.common import (
    BadInput,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
)
from orchestrator.contracts.errors import NoFleet
from orchestrator.contracts.models import parse_duration_hours
from orchestrator.planning.cost import PARTS, RestartModel
from orchestrator.telemetry.cost_ledger import owner_cost, replay, rows

HELD_NOTE = (
    "held_idle and drain_wait count every hour an owner held a host with no job on it (the "
    "record does not carry the queue): an upper bound of what the simulator counts"
)


def _since_hours(value: str) -> float:
    try:
        hours = parse_duration_hours(value, "since")
    except ValueError as err:
        raise BadInput(str(err), field="since") from None
    if hours <= 0:
        raise BadInput(f"since: must be above 0 (got {value!r})", field="since")
    return hours


def _print(o: dict[str, Any]) -> None:
    con = Console()
    con.print(
        f"maintenance cost over the last {o['since']} of fleet time "
        f"(fleet hours {o['from_fleet_hours']:.1f}-{o['to_fleet_hours']:.1f}): "
        f"{o['total_gpu_hours']:,.1f} GPU-h"
    )
    if not o["owners"]:
        con.print("no train, operation or campaign cost the jobs anything in this window")
        return
    t = Table("owner", "kind", "cluster", *PARTS, "total")
    for r in o["owners"]:
        t.add_row(
            r["owner"],
            r["owner_kind"],
            r["cluster"],
            *(f"{r[p]:,.1f}" for p in PARTS),
            f"{r['total']:,.1f}",
        )
    con.print(t)
    con.print(o["note"])


@click.command("report")
@click.option("--since", "since", default="7d", show_default=True, help="Window: 7d, 36h, ...")
@click.option("--cluster", default=None, help="Only this cluster.")
@json_option
@handle_errors
def report(since: str, cluster: str | None, as_json: bool) -> None:
    """What maintenance cost the jobs over the last SINCE of fleet time, per owner (train,
    operation, campaign) and part: capacity held, work lost since the last checkpoint,
    restarts, checkpoint writes asked for (GPU-hours), read from the fleet's record."""
    hours = _since_hours(since)
    fleet = open_fleet_or_fail(read_only=True)
    try:
        if cluster is not None and cluster not in fleet.cluster_names():
            raise BadInput(f"cluster: no cluster {cluster!r} in this fleet", field="cluster")
        now = fleet.fleet_time()
        start = max(0.0, now - hours)
        ends = {c: now for c in fleet.cluster_names()}
        replays = replay(fleet.records(cluster=cluster), start, ends)
    finally:
        fleet.close()
    owners = rows(replays)
    parts = {p: round(sum(float(r[p]) for r in owners), 3) for p in PARTS}
    model = RestartModel()
    out = {
        "since": since,
        "since_hours": hours,
        "from_fleet_hours": round(start, 3),
        "to_fleet_hours": round(now, 3),
        "cluster": cluster,
        "owners": owners,
        "parts": parts,
        "total_gpu_hours": round(sum(parts.values()), 3),
        "restart_minutes": round(model.restart_hours * 60.0, 3),
        "note": HELD_NOTE,
    }
    emit(out, as_json, _print)


def cost_of(owners: Collection[str]) -> dict[str, Any] | None:
    """What ``owners`` cost the jobs over the whole record of the fleet (``owner_cost``), for
    the status commands; None without a fleet to read."""
    from orchestrator.fleet import open_fleet

    try:
        fleet = open_fleet(read_only=True)
    except (FileNotFoundError, NoFleet):
        return None
    try:
        now = fleet.fleet_time()
        replays = replay(fleet.records(), 0.0, {c: now for c in fleet.cluster_names()})
    finally:
        fleet.close()
    return owner_cost(replays, owners)


def cost_line(cost: dict[str, Any] | None) -> str:
    """``  cost to jobs: 12.3 GPU-h (held_idle 1.0, ...); 2 jobs stopped, 0.4 ETTR points``."""
    if cost is None:
        return ""
    parts = ", ".join(f"{p} {v:,.1f}" for p, v in cost["parts"].items())
    return (
        f"  cost to jobs: {cost['total_gpu_hours']:,.1f} GPU-h ({parts}); "
        f"{cost['jobs_stopped']} job(s) stopped, {cost['ettr_points_lost']:.2f} ETTR points "
        "lost by them"
    )


COMMANDS = [report]
