"""What every fleet store reads the same way, whichever backend runs the jobs: the inventory
(``hosts_in``, ``failure_domains``), the append-only record (``records``), the store's ``meta``
and the fleet-wide list of bad versions.

``LedgerStore`` is the base of ``SqliteFleet`` (the simulated fleet) and ``SlurmFleet``: both
keep these in the same tables (``store_schema``), on SQLite or PostgreSQL, so the
``FleetBackend`` reads they answer from them are written once, here.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import bindparam, func, select

from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.bad_versions import BadVersion
from orchestrator.fleet import bad_versions as bad
from orchestrator.fleet.event_log import read_events
from orchestrator.fleet.store_db import Database
from orchestrator.fleet.store_schema import events, hosts, meta
from orchestrator.fleet.store_url import StoreRef

_COUNT = select(func.count()).select_from(hosts).where(hosts.c.cluster == bindparam("cluster"))
_DOMAINS = select(hosts.c.name, hosts.c.rack, hosts.c.zone)
_DOMAINS_OF = _DOMAINS.where(hosts.c.cluster == bindparam("cluster"))
_META = select(meta.c.key, meta.c.value)
_LAST_CLOSED = (
    select(events.c.t, events.c.actor, events.c.cluster)
    .where(events.c.kind == "owner_closed", events.c.actor.startswith(bindparam("prefix")))
    .order_by(events.c.seq.desc())
    .limit(1)
)


class LedgerStore:
    """The store's shared reads (see the module docstring); ``db`` is the store's own."""

    db: Database
    #: Where the store is: the SQLite file, or the PostgreSQL URL (no secrets in it).
    store: StoreRef

    def close(self) -> None:
        self.db.close()

    # -------------------------------------------------------------- inventory
    def hosts_in(self, cluster: str) -> int:
        return int(self.db.read(_COUNT, {"cluster": cluster})[0][0])

    def failure_domains(self, cluster: str | None = None) -> dict[str, tuple[str, str]]:
        """Host -> (rack, zone), from the inventory (every cluster's when ``cluster`` is None)."""
        rows = (
            self.db.read(_DOMAINS)
            if cluster is None
            else self.db.read(_DOMAINS_OF, {"cluster": cluster})
        )
        return {name: (rack, zone) for name, rack, zone in rows}

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
        return read_events(self.db, since, cluster)

    def get_meta(self) -> dict[str, str]:
        return {k: v for k, v in self.db.read(_META)}

    def last_closed(self, prefix: str) -> tuple[float, str, str] | None:
        """The latest recorded end of an owner named ``prefix...`` (``train-``: the last train
        that stopped), as (fleet hour, owner, cluster); None when none has ended."""
        rows = self.db.read(_LAST_CLOSED, {"prefix": prefix})
        return (float(rows[0][0]), str(rows[0][1]), str(rows[0][2])) if rows else None

    # ------------------------------------------------------------ bad versions
    def bad_versions(self, include_cleared: bool = False) -> list[BadVersion]:
        """Bad versions, oldest mark first (cleared ones too with ``include_cleared``)."""
        return [e for e in bad.read_bad(self.db).entries if include_cleared or e.active]

    def mark_bad(
        self, component: str, version: str, reason: str, by: str
    ) -> tuple[BadVersion, bool]:
        return bad.store_mark(self.db, component, version, reason, by)

    def clear_bad(self, component: str, version: str, reason: str, by: str) -> BadVersion:
        return bad.store_clear(self.db, component, version, reason, by)


__all__ = ["LedgerStore"]
