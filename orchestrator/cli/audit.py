"""``trainctl audit``: check the fleet's event log for broken invariants; exit 1 if any."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from orchestrator.audit import audit as run_audit
from orchestrator.cli.common import (
    EXIT_FAILED,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
)

#: Violations listed in the human view; --json always carries all of them.
_SHOWN = 20


def _print(o: dict[str, Any]) -> None:
    con = Console()
    violations = o["violations"]
    if not violations:
        con.print(f"[green]audit ok[/]: {o['events_checked']:,} events checked")
        return
    kinds = Counter(v["kind"] for v in violations)
    summary = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    con.print(
        f"[red]audit FAILED[/]: {len(violations)} violation(s) in "
        f"{o['events_checked']:,} events ({summary})"
    )
    t = Table("kind", "cluster", "host", "fleet h", "seq", "detail")
    for v in violations[:_SHOWN]:
        t.add_row(
            v["kind"], v["cluster"], v["host"] or "-", f"{v['t']:.2f}", str(v["seq"]), v["detail"]
        )
    con.print(t)
    if len(violations) > _SHOWN:
        con.print(f"... and {len(violations) - _SHOWN} more (use --json for all)")


@click.command("audit")
@click.option("--cluster", default=None, help="Only this cluster's events.")
@json_option
@handle_errors
def audit(cluster: str | None, as_json: bool) -> None:
    """Replay the fleet's event log and check its invariants: budget held, no host lost,
    no job on mixed gpu_driver/cuda, no host returned without passing verification."""
    fleet = open_fleet_or_fail()
    try:
        report = run_audit(fleet, cluster)
    finally:
        fleet.close()
    emit(report.model_dump(mode="json"), as_json, _print)
    if not report.ok:
        raise click.exceptions.Exit(EXIT_FAILED)


COMMANDS = [audit]
