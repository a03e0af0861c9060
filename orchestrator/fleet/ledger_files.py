"""Fleet files, whichever backend: how one is opened for writing, and how a new one is made
atomically (built in a temporary file beside it, then renamed into place), so a failed
``fleet init`` leaves nothing behind and no reader ever sees half a fleet."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from orchestrator.fleet.sqlite_schema import SCHEMA


def connect(path: Path) -> sqlite3.Connection:
    """A writing connection to the fleet file at ``path`` (WAL; long waits for the lock)."""
    conn = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=120000")
    return conn


def create_file(path: Path, fill: Callable[[sqlite3.Connection], None]) -> None:
    """Make the tables of ``SCHEMA`` in a temporary file, let ``fill`` write its rows in one
    transaction, then move the file to ``path`` (the old one, if any, replaced at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        conn.executescript(SCHEMA)
        conn.execute("BEGIN")
        fill(conn)
        conn.execute("COMMIT")
        conn.close()
        os.replace(tmp, path)
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


__all__ = ["connect", "create_file"]
