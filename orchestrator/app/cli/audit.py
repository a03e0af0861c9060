"""``trainctl audit``: check the fleet's event log for broken invariants; exit 1 if any."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from orchestrator.app.cli.common import (
    EXIT_FAILED,
    BadInput,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import check_same_fleet, try_connect
from orchestrator.audit.owners import OpenHold, audit_fleet_with_holds, with_dead_owners

#: How long the audit waits for Temporal before it audits the record alone.
OWNERS_CONNECT_TIMEOUT = 5.0
#: How long one owner's workflow description may take.
DESCRIBE_TIMEOUT = 10.0

#: Violations listed in the human view; --json always carries all of them.
_SHOWN = 20


def _print(o: dict[str, Any]) -> None:
    con = Console()
    violations = o["violations"]
    if not violations:
        checks = o.get("hosts_checked_in_place", 0)
        in_place = f" ({checks:,} visits in place, nothing drained)" if checks else ""
        con.print(
            f"[green]audit ok[/]: {o['events_checked']:,} events checked{in_place}; {o['owners']}"
        )
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
    con.print(o["owners"])


async def owners_running(
    address: str | None, owners: list[str]
) -> tuple[dict[str, bool] | None, str]:
    """Whether each owner's workflow is running on the Temporal server (the command's
    connection options), and a line saying what was checked; None when no server answered."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    from orchestrator.infra.connection import redact

    not_checked = "owners not checked (the record alone was audited): "
    conn = await try_connect(address, OWNERS_CONNECT_TIMEOUT)
    if conn.client is None:
        return None, f"{not_checked}no Temporal server answered at {conn.address} ({conn.why})"
    client = conn.client
    try:  # another fleet's server knows nothing of this fleet's owners
        await check_same_fleet(client, conn.address)
    except BadInput as err:
        return None, f"{not_checked}{err.message}"
    running: dict[str, bool] = {}
    for owner in owners:
        try:
            desc = await asyncio.wait_for(
                client.get_workflow_handle(owner).describe(), DESCRIBE_TIMEOUT
            )
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                why = redact(err.message, conn.secrets)
                return None, f"{not_checked}{conn.address} did not describe {owner} ({why})"
            running[owner] = False  # unknown to the server
        except TimeoutError:
            return None, f"{not_checked}{conn.address} did not describe {owner} in time"
        else:
            running[owner] = desc.status == WorkflowExecutionStatus.RUNNING
    dead = sorted(o for o, alive in running.items() if not alive)
    return running, (
        f"{len(owners)} open owner(s) checked on {conn.address}"
        + (f", not running: {', '.join(dead)}" if dead else ", all running")
    )


def check_owners(address: str | None, holds: list[OpenHold]) -> tuple[dict[str, bool] | None, str]:
    """``owners_running`` for the owners of ``holds``; nothing to ask when none is open."""
    owners = sorted({h.owner for h in holds})
    if not owners:
        return {}, "no open owner holds a host"
    return asyncio.run(owners_running(address, owners))


@click.command("audit")
@click.option("--cluster", default=None, help="Only this cluster's events.")
@connection_options
@json_option
@handle_errors
def audit(cluster: str | None, address: str | None, as_json: bool) -> None:
    """Replay the fleet's event log and check its invariants: budget held, no host lost,
    no job on mixed gpu_driver/cuda, no host returned without passing verification; and,
    when the Temporal server answers, no host held by an owner whose workflow is not running
    and that recorded no close (dead_owner). Without a server the output says the owners
    were not checked."""
    fleet = open_fleet_or_fail(read_only=True)  # reads only: works on a read-only file
    try:
        report, holds = audit_fleet_with_holds(fleet, cluster)
    finally:
        fleet.close()
    running, note = check_owners(address, holds)
    if running is not None:
        report = with_dead_owners(report, holds, running)
    out = {**report.model_dump(mode="json"), "owners_checked": running is not None}
    emit({**out, "owners": note}, as_json, _print)
    if not report.ok:
        raise click.exceptions.Exit(EXIT_FAILED)


COMMANDS = [audit]
