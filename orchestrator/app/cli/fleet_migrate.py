"""``trainctl fleet migrate --to STORE``: copy the fleet, record included, into another store.

The way from the embedded SQLite file to a PostgreSQL store shared by workers on many
machines (``--to postgresql://USER@HOST:PORT/DB``, an empty database; the home then uses it:
the URL goes to ``TRAINCTL_HOME/store``), and back to a file (``--to PATH``, a backup or a
way home). Every table is copied in one transaction of the new store, the event log with its
sequence numbers, so ``trainctl audit`` reads the same record before and after. Refused while
a worker uses the fleet: stop the workers first, start them on the new store after.
"""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.app.cli.common import BadInput, emit, handle_errors, json_option
from orchestrator.app.cli.fleet_replace import make_room


@click.command("migrate")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="STORE",
    help="postgresql://USER@HOST:PORT/DB (no password: PGPASSWORD, ~/.pgpass or PGPASSFILE), "
    "or the path of a new SQLite file.",
)
@click.option("--force", is_flag=True, help="Replace a fleet already in the target store.")
@json_option
@handle_errors
def migrate(to: str, force: bool, as_json: bool) -> None:
    """Copy this home's fleet, record included, into another store (atomically)."""
    from orchestrator.app.cli.fleet import remember_store
    from orchestrator.fleet import fleet_store, open_fleet
    from orchestrator.fleet.heartbeats import live_workers_at
    from orchestrator.fleet.ledger_files import copy_store
    from orchestrator.fleet.ledger_store import LedgerStore
    from orchestrator.fleet.store_url import check_store_url, describe, is_url

    target = check_store_url(to) if "://" in to else Path(to).expanduser().resolve()
    source = fleet_store()
    if str(target) == str(source):
        raise BadInput(f"to: {describe(target)} is the store this fleet is in", field="to")
    live = live_workers_at(source)
    if live:
        raise BadInput(
            f"to: {len(live)} worker(s) still use the fleet ({live[0].describe()}); stop them "
            "first, then start them on the new store",
            field="to",
        )
    make_room(target, force)
    fleet = open_fleet()  # migrates an old file in place first
    try:
        if not isinstance(fleet, LedgerStore):
            raise BadInput("to: this fleet's store cannot be copied", field="to")
        counts = copy_store(fleet.db, target, force=True)
    finally:
        fleet.close()
    if is_url(target):
        remember_store(target)
    out = {
        "from": describe(source),
        "to": describe(target),
        "rows": counts,
        "events": counts.get("events", 0),
        "uses": describe(target) if is_url(target) else describe(source),
    }
    emit(
        out,
        as_json,
        lambda o: click.echo(
            f"fleet copied from {o['from']} to {o['to']}: {o['events']:,} events, "
            f"{o['rows'].get('hosts', 0):,} hosts; this home now uses {o['uses']}"
        ),
    )
