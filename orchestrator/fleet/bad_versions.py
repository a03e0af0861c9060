"""Versions known to be bad, fleet-wide: marked by blame or by an operator, cleared by one.

Kept in the fleet file (its ``meta`` table, key ``bad_versions``, one JSON document) whichever
backend the fleet runs on, so every worker, every CLI and every backend sharing the fleet store
reads the same list, and changes are transactions like every other fleet change. The store side
(``read_bad``, ``store_mark``, ``store_clear``, on a connection) is what both fleets'
``FleetBackend.bad_versions``/``mark_bad``/``clear_bad`` run (``ledger_store``); callers use
those, or the helpers below, which take any ``FleetBackend``.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.bad_versions import BadVersion, BadVersions
from orchestrator.contracts.models import Component, check_version

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
def read_bad(conn: sqlite3.Connection) -> BadVersions:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (META_KEY,)).fetchone()
    return BadVersions.model_validate_json(row[0]) if row and row[0] else BadVersions()


def _write(conn: sqlite3.Connection, doc: BadVersions) -> None:
    conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (META_KEY, doc.model_dump_json()))


def store_mark(
    conn: sqlite3.Connection, component: str, version: str, reason: str, by: str
) -> tuple[BadVersion, bool]:
    """Mark ``component=version`` bad; (its entry, True if it was not bad already)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        doc = read_bad(conn)
        for e in doc.entries:
            if e.active and (e.component, e.version) == (component, version):
                conn.execute("ROLLBACK")
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
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return entry, True


def store_clear(
    conn: sqlite3.Connection, component: str, version: str, reason: str, by: str
) -> BadVersion:
    """Clear ``component=version``; LookupError if it is not marked bad."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        doc = read_bad(conn)
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
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
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
