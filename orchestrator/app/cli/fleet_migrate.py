"""``trainctl fleet migrate --to STORE``: copy the fleet, record included, into another store.

The way from the embedded SQLite file to a PostgreSQL store shared by workers on many
machines (``--to postgresql://USER@HOST:PORT/DB``, an empty database; the home then uses it:
the URL goes to ``TRAINCTL_HOME/store``), and back to a file (``--to PATH``, a backup or a
way home). Every table is copied in one transaction of the new store, the event log with its
sequence numbers, so ``trainctl audit`` reads the same record before and after. Refused while
a worker uses the fleet: stop the workers first, start them on the new store after.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from orchestrator.app.cli.common import BadInput, emit, handle_errors, json_option
from orchestrator.app.cli.fleet_replace import make_room
from orchestrator.fleet.store_url import BadStore, StoreRef, check_store_url

#: The first bytes of every SQLite database: a file without them is not a fleet to replace.
_SQLITE_HEADER = b"SQLite format 3\x00"
_NEW = "name a new SQLite file or a postgresql:// URL"


def target_of(to: str) -> StoreRef:
    """The store ``--to`` names, checked before anything is read or copied (BadInput naming
    ``to``): a URL as ``fleet init --store`` takes it, or a SQLite file that can be made."""
    if "://" in to:
        try:
            return check_store_url(to)
        except BadStore as err:
            raise BadInput("to: " + str(err).removeprefix("store: "), field="to") from None
    if not to.strip():
        raise BadInput(f"to: empty; {_NEW}", field="to")
    path = Path(to).expanduser().resolve()
    if path.is_dir():
        raise BadInput(
            f"to: {to} is a directory; name a file, e.g. {Path(to, 'fleet.db')}", field="to"
        )
    if path.exists() or path.is_symlink():
        _check_replaceable(path, to)
    else:
        _check_creatable(path, to)
    return path


def _check_replaceable(path: Path, to: str) -> None:
    """An existing ``--to`` must be a fleet file (``--force`` replaces it), never something
    else: a device, a text file, a broken link."""
    if not path.is_file():
        raise BadInput(f"to: {to} is not a regular file; {_NEW}", field="to")
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError as err:
        raise BadInput(f"to: cannot read {to} ({err.strerror or err})", field="to") from None
    if head and head != _SQLITE_HEADER:
        raise BadInput(
            f"to: {to} is a file that is not a fleet database (not SQLite); {_NEW}, or "
            "remove that file first",
            field="to",
        )


def _check_creatable(path: Path, to: str) -> None:
    """A new file can be made where ``--to`` says: its nearest existing folder takes one (a
    file made and removed at once; the folders below it are made by the copy)."""
    base = path.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise BadInput(f"to: {base} is not a directory, so {to} cannot be made", field="to")
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as err:
        raise BadInput(
            f"to: cannot create {to}: its folder {base} takes no new file ({err.strerror or err})",
            field="to",
        ) from None


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
    from orchestrator.fleet.store_url import describe, is_url

    target = target_of(to)
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
