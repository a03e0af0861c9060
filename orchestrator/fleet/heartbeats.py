"""Which workers are using a fleet store: a heartbeat row per worker, renewed every few seconds.

A destructive command (``fleet init --force``, ``demo --force``) must not pull the record from
under a worker still writing to it: the worker would go on writing to a deleted file and all its
work would be lost. Each worker (``trainctl worker``, the demo's embedded one) keeps a row in
the store's ``workers`` table (``store_schema``) and renews its ``last_seen`` every
``RENEW_SECONDS``; a worker is live while its row is fresher than ``FRESH_SECONDS``. The row
lives in the store, not on the local machine, so the rule holds for workers on several machines
sharing one store (a PostgreSQL store keeps the same table and runs the same statements).

Wall-clock seconds (``time.time()``): a heartbeat says when a process was last alive, which
is no fleet time.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import bindparam, inspect, select

from orchestrator.fleet.ledger_files import open_postgresql
from orchestrator.fleet.store_db import Database
from orchestrator.fleet.store_schema import workers
from orchestrator.fleet.store_url import is_url

#: Seconds between two renewals of a worker's heartbeat.
RENEW_SECONDS = 5.0
#: A heartbeat younger than this says its worker is alive (three renewals missed: it is not).
FRESH_SECONDS = 3 * RENEW_SECONDS


@dataclass(frozen=True)
class WorkerBeat:
    """One worker's row: who it is, where it runs, which fleet file, when last seen."""

    id: str
    host: str
    pid: int
    fleet: str
    started: float
    last_seen: float

    def describe(self, now: float | None = None) -> str:
        ago = max(0.0, (now or time.time()) - self.last_seen)
        return f"worker {self.id} (pid {self.pid} on {self.host}, seen {ago:.0f}s ago)"


def new_worker_id() -> str:
    """An id unique across machines and restarts: host, pid and a random tail."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


_RENEW = workers.update().where(workers.c.id == bindparam("wid")).values(last_seen=bindparam("now"))
_LEAVE = workers.delete().where(workers.c.id == bindparam("wid"))
_LIVE = (
    select(
        workers.c.id,
        workers.c.host,
        workers.c.pid,
        workers.c.fleet,
        workers.c.started,
        workers.c.last_seen,
    )
    .where(workers.c.last_seen > bindparam("fresh"))
    .order_by(workers.c.last_seen.desc())
)


def beat(db: Database, worker_id: str, fleet: Path | str, now: float | None = None) -> None:
    """Record (or renew) ``worker_id``'s heartbeat, in its own transaction."""
    now = time.time() if now is None else now
    with db.tx() as conn:
        if not conn.execute(_RENEW, {"wid": worker_id, "now": now}).rowcount:
            conn.execute(
                workers.insert().values(
                    id=worker_id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    fleet=str(fleet),
                    started=now,
                    last_seen=now,
                )
            )


def leave(db: Database, worker_id: str) -> None:
    """A worker stopping cleanly removes its row: it is no longer alive."""
    with db.tx() as conn:
        conn.execute(_LEAVE, {"wid": worker_id})


def live_workers(db: Database, now: float | None = None) -> list[WorkerBeat]:
    """Workers whose heartbeat is fresh, the most recently seen first."""
    now = time.time() if now is None else now
    rows = db.read(_LIVE, {"fresh": now - FRESH_SECONDS})
    return [
        WorkerBeat(str(i), str(h), int(p), str(f), float(s), float(t)) for i, h, p, f, s, t in rows
    ]


def open_beats(store: Path | str) -> Database:
    """A connection for a worker's heartbeats to its store (a SQLite file: short lock waits,
    no journal change; a PostgreSQL URL: the store's own)."""
    if is_url(store):
        return open_postgresql(str(store))
    raw = sqlite3.connect(store, timeout=30, isolation_level=None, check_same_thread=False)
    raw.execute("PRAGMA busy_timeout=30000")
    return Database.sqlite(raw, str(store))


def live_workers_at(path: Path | str, now: float | None = None) -> list[WorkerBeat]:
    """The live workers of the fleet store at ``path``: none for a file that is missing, damaged
    or older than the table (a file nobody can open is no file anyone writes to), or for a
    PostgreSQL store without the table."""
    if is_url(path):
        db = open_postgresql(str(path))
        try:
            if not inspect(db.conn).has_table("workers"):
                return []
            return live_workers(db, now)
        finally:
            db.close()
    path = Path(path)
    if not path.is_file():
        return []
    try:
        raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return []
    db = Database.sqlite(raw, str(path))
    try:
        return live_workers(db, now)
    except sqlite3.Error as err:
        if any(word in str(err) for word in ("locked", "busy")):
            raise  # cannot tell: the caller must not take it for "nobody"
        return []
    finally:
        db.close()
