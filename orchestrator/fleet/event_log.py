"""The fleet store's append-only event log: what `trainctl audit` replays to prove nothing was lost.

Every change a fleet transaction makes to a host is also written here, in the same transaction,
as one row of the ``events`` table; rows are never updated or deleted, and their ``seq`` orders
them (on PostgreSQL appends take turns until commit, ``store_db.lock_appends``, so ``seq``
order is commit order there too). The simulated fleet writes and reads it only through these two
functions, so audit, metrics, status and the campaign activities all see one order and one
shape. (The Slurm record, ``slurm/``, keeps its log in the same table through the same two.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from sqlalchemy import Connection, bindparam, select

from orchestrator.contracts.backend import RecordEntry
from orchestrator.fleet.store_db import Database, lock_appends
from orchestrator.fleet.store_schema import events

#: Rows read per query while following the log (each page its own short read).
PAGE = 20_000

_INSERT = events.insert()
_COLS = (events.c.seq, events.c.t, events.c.cluster, events.c.actor, events.c.kind)
_PAGE = (
    select(*_COLS, events.c.host, events.c.detail)
    .where(events.c.seq > bindparam("since"))
    .order_by(events.c.seq)
    .limit(PAGE)
)
_PAGE_OF = _PAGE.where(events.c.cluster == bindparam("cluster"))


def append_events(conn: Connection, cluster: str, entries: Iterable[RecordEntry]) -> None:
    """Add ``entries`` of ``cluster`` to the end of the log (inside the caller's transaction)."""
    rows = [
        {
            "t": e.t,
            "cluster": cluster,
            "actor": e.actor,
            "kind": e.kind,
            "host": e.host,
            "detail": json.dumps(dict(e.detail)),
        }
        for e in entries
    ]
    if rows:
        lock_appends(conn)
        conn.execute(_INSERT, rows)


def read_events(
    db: Database, since: int = 0, cluster: str | None = None
) -> Iterator[tuple[int, RecordEntry, str]]:
    """The log after ``since`` in order, optionally of one cluster: (seq, event, cluster)."""
    while True:
        params = {"since": since, "cluster": cluster} if cluster else {"since": since}
        rows = db.read(_PAGE_OF if cluster else _PAGE, params)
        for seq, t, c, actor, kind, host, detail in rows:
            yield seq, RecordEntry(t, actor, kind, host, json.loads(detail)), c
        if len(rows) < PAGE:
            return
        since = rows[-1][0]
