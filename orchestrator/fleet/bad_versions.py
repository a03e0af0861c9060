"""Versions known to be bad, fleet-wide: marked by blame or by an operator, cleared by one.

Kept in the fleet store (its ``meta`` table, key ``bad_versions``, one JSON document) whichever
backend the fleet runs on, so every worker, every CLI and every backend sharing the fleet store
reads the same list, and changes are transactions like every other fleet change. The store side
(``read_bad``, ``store_mark``, ``store_clear``, on a connection) is what both fleets'
``FleetBackend.bad_versions``/``mark_bad``/``clear_bad`` run (``ledger_store``); callers use
those, or the helpers below, which take any ``FleetBackend``. A change holds the store's
``schema_version`` row for its transaction (PostgreSQL), so two workers marking at once both
land.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, select

from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.bad_versions import BadVersion, BadVersions
from orchestrator.contracts.models import Component, check_version
from orchestrator.fleet.store_db import Database, upsert
from orchestrator.fleet.store_schema import meta, schema_version

META_KEY = "bad_versions"


def parse_pair(text: str, field: str = "version") -> tuple[str, str]:
    """``COMPONENT=VERSION`` -> (component, version); ValueError naming ``field``."""
    comp, sep, version = text.partition("=")
    if not sep or not comp or not version:
        raise ValueError(f"{field}: {text!r} is not COMPONENT=VERSION (e.g. os=6.12.0-bad)")
    if comp not in set(Component):
        raise ValueError(f"{field}: unknown component {comp!r} (one of {', '.join(Component)})")
    return comp, check_version(field, version)


# ------------------------------------------------------------------ the store
_READ = select(meta.c.value).where(meta.c.key == META_KEY)


def _parse(rows: Sequence[Any]) -> BadVersions:
    value = rows[0][0] if rows else None
    return BadVersions.model_validate_json(value) if value else BadVersions()


def read_bad(db: Database) -> BadVersions:
    return _parse(db.read(_READ))


def _locked(conn: Connection) -> BadVersions:
    schema_version(conn, lock=True)
    return _parse(conn.execute(_READ).all())


def _write(conn: Connection, doc: BadVersions) -> None:
    upsert(conn, meta, [{"key": META_KEY, "value": doc.model_dump_json()}])


def store_mark(
    db: Database, component: str, version: str, reason: str, by: str
) -> tuple[BadVersion, bool]:
    """Mark ``component=version`` bad; (its entry, True if it was not bad already)."""
    with db.tx() as conn:
        doc = _locked(conn)
        for e in doc.entries:
            if e.active and (e.component, e.version) == (component, version):
                return e, False
        entry = BadVersion(
            component=component,
            version=version,
            reason=reason,
            marked_by=by,
            marked_at=datetime.now(UTC),
        )
        doc.entries.append(entry)
        _write(conn, doc)
    return entry, True


def store_clear(db: Database, component: str, version: str, reason: str, by: str) -> BadVersion:
    """Clear ``component=version``; LookupError if it is not marked bad."""
    with db.tx() as conn:
        doc = _locked(conn)
        found = next(
            (
                e
                for e in doc.entries
                if e.active and (e.component, e.version) == (component, version)
            ),
            None,
        )
        if found is None:
            raise LookupError(f"version: {component}={version} is not marked bad")
        found.cleared_by, found.cleared_at, found.cleared_reason = by, datetime.now(UTC), reason
        _write(conn, doc)
    return found


# ------------------------------------------------------------- for any fleet
def list_bad(fleet: FleetBackend, include_cleared: bool = False) -> list[BadVersion]:
    """Bad versions, oldest mark first (cleared ones too with ``include_cleared``)."""
    return fleet.bad_versions(include_cleared)


def active_bad(fleet: FleetBackend) -> list[tuple[str, str, str]]:
    """(component, version, why) of every version bad now: what the version policy reads."""
    return [
        (e.component, e.version, f"{e.reason}; marked by {e.marked_by}")
        for e in fleet.bad_versions()
    ]


def mark_bad(
    fleet: FleetBackend, component: str, version: str, reason: str, by: str
) -> tuple[BadVersion, bool]:
    """Mark ``component=version`` bad; (its entry, True if it was not bad already)."""
    return fleet.mark_bad(component, version, reason, by)


def clear_bad(
    fleet: FleetBackend, component: str, version: str, reason: str, by: str
) -> BadVersion:
    """Clear ``component=version``; LookupError if it is not marked bad."""
    return fleet.clear_bad(component, version, reason, by)


__all__ = [
    "META_KEY",
    "BadVersion",
    "BadVersions",
    "active_bad",
    "clear_bad",
    "list_bad",
    "mark_bad",
    "parse_pair",
    "read_bad",
    "store_clear",
    "store_mark",
]
