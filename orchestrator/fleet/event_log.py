"""The fleet file's append-only event log: what `trainctl audit` replays to prove nothing was lost.

Every change a fleet transaction makes to a host is also written here, in the same transaction,
as one row of the ``events`` table; rows are never updated or deleted, and their ``seq`` orders
them. The simulated fleet writes and reads it only through these two functions, so audit,
metrics, status and the campaign activities all see one order and one shape. (The Slurm
record, ``slurm/``, keeps its log in the same table through the same two.)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from orchestrator.contracts.backend import RecordEntry


def append_events(conn: sqlite3.Connection, cluster: str, events: Iterable[RecordEntry]) -> None:
    """Add ``events`` of ``cluster`` to the end of the log (inside the caller's transaction)."""
    conn.executemany(
        "INSERT INTO events (t, cluster, actor, kind, host, detail) VALUES (?,?,?,?,?,?)",
        [(e.t, cluster, e.actor, e.kind, e.host, json.dumps(dict(e.detail))) for e in events],
    )


def read_events(
    conn: sqlite3.Connection, since: int = 0, cluster: str | None = None
) -> Iterator[tuple[int, RecordEntry, str]]:
    """The log after ``since`` in order, optionally of one cluster: (seq, event, cluster)."""
    sql = "SELECT seq, t, cluster, actor, kind, host, detail FROM events WHERE seq > ?"
    args: list[Any] = [since]
    if cluster:
        sql += " AND cluster = ?"
        args.append(cluster)
    for seq, t, c, actor, kind, host, detail in conn.execute(sql + " ORDER BY seq", args):
        yield seq, RecordEntry(t, actor, kind, host, json.loads(detail)), c
