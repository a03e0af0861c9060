"""Versions known to be bad, fleet-wide: marked by blame or by an operator, cleared by one.

Kept in the fleet file (its ``meta`` table, key ``bad_versions``, one JSON document), so every
worker, every CLI and every backend sharing the fleet store reads the same list, and changes
are transactions like every other fleet change. A cleared version keeps its entry, with who
cleared it and why, so ``trainctl versions list --all`` tells the whole story.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from orchestrator.contracts.models import Component, check_version
from orchestrator.fleet.sqlite_fleet import SqliteFleet

META_KEY = "bad_versions"


class BadVersion(BaseModel):
    """One version marked bad (and, once cleared, who cleared it and why)."""

    component: str
    version: str
    reason: str
    marked_by: str
    marked_at: datetime
    cleared_by: str | None = None
    cleared_at: datetime | None = None
    cleared_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.cleared_at is None


class BadVersions(BaseModel):
    entries: list[BadVersion] = Field(default_factory=list)


def parse_pair(text: str, field: str = "version") -> tuple[str, str]:
    """``COMPONENT=VERSION`` -> (component, version); ValueError naming ``field``."""
    comp, sep, version = text.partition("=")
    if not sep or not comp or not version:
        raise ValueError(f"{field}: {text!r} is not COMPONENT=VERSION (e.g. os=6.12.0-bad)")
    if comp not in set(Component):
        raise ValueError(f"{field}: unknown component {comp!r} (one of {', '.join(Component)})")
    return comp, check_version(field, version)


def _read(fleet: SqliteFleet) -> BadVersions:
    raw = fleet.get_meta().get(META_KEY)
    return BadVersions.model_validate_json(raw) if raw else BadVersions()


def _write(fleet: SqliteFleet, doc: BadVersions) -> None:
    fleet.conn.execute(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)", (META_KEY, doc.model_dump_json())
    )


def list_bad(fleet: SqliteFleet, include_cleared: bool = False) -> list[BadVersion]:
    """Bad versions, oldest mark first (cleared ones too with ``include_cleared``)."""
    return [e for e in _read(fleet).entries if include_cleared or e.active]


def active_bad(fleet: SqliteFleet) -> list[tuple[str, str, str]]:
    """(component, version, why) of every version bad now: what the version policy reads."""
    return [
        (e.component, e.version, f"{e.reason}; marked by {e.marked_by}") for e in list_bad(fleet)
    ]


def mark_bad(
    fleet: SqliteFleet, component: str, version: str, reason: str, by: str
) -> tuple[BadVersion, bool]:
    """Mark ``component=version`` bad; (its entry, True if it was not bad already)."""
    fleet.conn.execute("BEGIN IMMEDIATE")
    try:
        doc = _read(fleet)
        for e in doc.entries:
            if e.active and (e.component, e.version) == (component, version):
                fleet.conn.execute("ROLLBACK")
                return e, False
        entry = BadVersion(
            component=component,
            version=version,
            reason=reason,
            marked_by=by,
            marked_at=datetime.now(UTC),
        )
        doc.entries.append(entry)
        _write(fleet, doc)
    except BaseException:
        fleet.conn.execute("ROLLBACK")
        raise
    fleet.conn.execute("COMMIT")
    return entry, True


def clear_bad(fleet: SqliteFleet, component: str, version: str, reason: str, by: str) -> BadVersion:
    """Clear ``component=version``; LookupError if it is not marked bad."""
    fleet.conn.execute("BEGIN IMMEDIATE")
    try:
        doc = _read(fleet)
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
        _write(fleet, doc)
    except BaseException:
        fleet.conn.execute("ROLLBACK")
        raise
    fleet.conn.execute("COMMIT")
    return found
