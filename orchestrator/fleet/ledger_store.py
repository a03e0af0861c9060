"""What every fleet store reads the same way from its fleet file, whichever backend runs the jobs:
the inventory (``hosts_in``, ``failure_domains``), the append-only record (``records``), the
file's ``meta`` and the fleet-wide list of bad versions.

``LedgerStore`` is the base of ``SqliteFleet`` (the simulated fleet) and ``SlurmFleet``: both
keep these in the same tables (``sqlite_schema``), so the ``FleetBackend`` reads they answer
from them are written once, here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.bad_versions import BadVersion
from orchestrator.fleet import bad_versions as bad
from orchestrator.fleet.event_log import read_events


class LedgerStore:
    """The fleet file's shared reads (see the module docstring); ``conn`` is the store's own."""

    conn: sqlite3.Connection

    def close(self) -> None:
        self.conn.close()

    # -------------------------------------------------------------- inventory
    def hosts_in(self, cluster: str) -> int:
        row = self.conn.execute("SELECT COUNT(*) FROM hosts WHERE cluster=?", (cluster,)).fetchone()
        return int(row[0])

    def failure_domains(self, cluster: str | None = None) -> dict[str, tuple[str, str]]:
        """Host -> (rack, zone), from the inventory (every cluster's when ``cluster`` is None)."""
        sql = "SELECT name, rack, zone FROM hosts"
        args: tuple[str, ...] = ()
        if cluster is not None:
            sql, args = sql + " WHERE cluster = ?", (cluster,)
        return {name: (rack, zone) for name, rack, zone in self.conn.execute(sql, args)}

    # ----------------------------------------------------------------- record
    def records(
        self, since: int = 0, cluster: str | None = None
    ) -> Iterator[tuple[int, RecordEntry, str]]:
        """The backend interface's name for the event log (``events``)."""
        return self.events(since, cluster)

    def events(
        self, since: int = 0, cluster: str | None = None
    ) -> Iterator[tuple[int, RecordEntry, str]]:
        """The append-only event log in order: (seq, event, cluster)."""
        return read_events(self.conn, since, cluster)

    def get_meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    # ------------------------------------------------------------ bad versions
    def bad_versions(self, include_cleared: bool = False) -> list[BadVersion]:
        """Bad versions, oldest mark first (cleared ones too with ``include_cleared``)."""
        return [e for e in bad.read_bad(self.conn).entries if include_cleared or e.active]

    def mark_bad(
        self, component: str, version: str, reason: str, by: str
    ) -> tuple[BadVersion, bool]:
        return bad.store_mark(self.conn, component, version, reason, by)

    def clear_bad(self, component: str, version: str, reason: str, by: str) -> BadVersion:
        return bad.store_clear(self.conn, component, version, reason, by)


__all__ = ["LedgerStore"]
