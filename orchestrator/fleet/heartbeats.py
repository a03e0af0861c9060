"""Which workers are using a fleet store: a heartbeat row per worker, renewed every few seconds.

A destructive command (``fleet init --force``, ``demo --force``) must not pull the record from
under a worker still writing to it: the worker would go on writing to a deleted file and all its
work would be lost. Each worker (``trainctl worker``, the demo's embedded one) keeps a row in
the store's ``workers`` table (``sqlite_schema``) and renews its ``last_seen`` every
``RENEW_SECONDS``; a worker is live while its row is fresher than ``FRESH_SECONDS``. The row
lives in the store, not on the local machine, so the rule holds for workers on several machines
sharing one store (a PostgreSQL store keeps the same table and these statements, which use
only portable SQL and the DB-API).

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


def beat(conn: sqlite3.Connection, worker_id: str, fleet: Path, now: float | None = None) -> None:
    """Record (or renew) ``worker_id``'s heartbeat, in its own transaction."""
    now = time.time() if now is None else now
    conn.execute("BEGIN IMMEDIATE")
    try:
        updated = conn.execute(
            "UPDATE workers SET last_seen=? WHERE id=?", (now, worker_id)
        ).rowcount
        if not updated:
            conn.execute(
                "INSERT INTO workers (id, host, pid, fleet, started, last_seen) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (worker_id, socket.gethostname(), os.getpid(), str(fleet), now, now),
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def leave(conn: sqlite3.Connection, worker_id: str) -> None:
    """A worker stopping cleanly removes its row: it is no longer alive."""
    conn.execute("DELETE FROM workers WHERE id=?", (worker_id,))


def live_workers(conn: sqlite3.Connection, now: float | None = None) -> list[WorkerBeat]:
    """Workers whose heartbeat is fresh, the most recently seen first."""
    now = time.time() if now is None else now
    rows = conn.execute(
        "SELECT id, host, pid, fleet, started, last_seen FROM workers "
        "WHERE last_seen > ? ORDER BY last_seen DESC",
        (now - FRESH_SECONDS,),
    ).fetchall()
    return [
        WorkerBeat(str(i), str(h), int(p), str(f), float(s), float(t)) for i, h, p, f, s, t in rows
    ]


def live_workers_at(path: Path, now: float | None = None) -> list[WorkerBeat]:
    """The live workers of the fleet file at ``path``: none for a file that is missing, damaged
    or older than the table (a file nobody can open is no file anyone writes to)."""
    if not path.is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return []
    try:
        return live_workers(conn, now)
    except sqlite3.Error as err:
        if any(word in str(err) for word in ("locked", "busy")):
            raise  # cannot tell: the caller must not take it for "nobody"
        return []
    finally:
        conn.close()
