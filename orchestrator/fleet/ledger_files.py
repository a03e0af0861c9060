"""Fleet stores, whichever backend: how one is opened for writing, and how a new one is made
atomically, so a failed ``fleet init`` leaves nothing behind and no reader ever sees half a
fleet: a SQLite file is built in a temporary file beside it, then renamed into place; a
PostgreSQL store is built in one transaction (its DDL is transactional), after the old
tables are dropped in that same transaction when the store held a fleet and ``force`` says so.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection, create_engine, inspect, select, text

from orchestrator.contracts.errors import PermanentError
from orchestrator.fleet.store_db import Database, StoreUnavailable, continue_sequences
from orchestrator.fleet.store_schema import generations, meta, metadata
from orchestrator.fleet.store_url import StoreRef, driver_url, is_url


def connect(path: Path) -> sqlite3.Connection:
    """A writing connection to the fleet file at ``path`` (WAL; long waits for the lock)."""
    conn = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=120000")
    return conn


def open_postgresql(url: str) -> Database:
    """The PostgreSQL store at ``url`` (checked: no password; libpq finds it). Connections are
    checked before use, so one the server dropped is replaced, not reported."""
    engine = create_engine(
        driver_url(url),
        pool_pre_ping=True,
        pool_size=1,
        max_overflow=4,
        connect_args={"connect_timeout": 10, "application_name": "trainctl"},
    )
    return Database(engine, url)


def open_store(ref: StoreRef) -> Database:
    """A writing connection to the store ``ref`` (a SQLite file or a PostgreSQL URL)."""
    if is_url(ref):
        return open_postgresql(str(ref))
    path = Path(ref)
    return Database.sqlite(connect(path), str(path))


def peek_meta(ref: StoreRef, key: str, timeout: float = 5) -> str | None:
    """``meta[key]`` of the store at ``ref``, read only, never migrated: None when there is no
    store (no file, no tables) or, for a SQLite file, it cannot be read. A PostgreSQL store
    that does not answer raises ``StoreUnavailable``."""
    if is_url(ref):
        db = open_postgresql(str(ref))
        try:
            if not inspect(db.conn).has_table("meta"):
                return None
            rows = db.read(select(meta.c.value).where(meta.c.key == key))
        finally:
            db.close()
        return str(rows[0][0]) if rows else None
    path = Path(ref)
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])


def create_store(ref: StoreRef, fill: Callable[[Connection], None], force: bool = True) -> None:
    """Make the tables of ``store_schema`` and let ``fill`` write their rows, atomically: at
    ``ref`` a SQLite file (the old one, if any, replaced at once) or a PostgreSQL store (one
    that already holds a fleet is refused unless ``force``, then emptied in the same
    transaction)."""
    if is_url(ref):
        _create_postgresql(str(ref), fill, force)
    else:
        _create_file(Path(ref), fill)


#: Rows copied per statement by ``copy_store``.
_COPY_CHUNK = 5_000


def copy_store(source: Database, target: StoreRef, force: bool = False) -> dict[str, int]:
    """Copy every table of the store ``source`` (at ``SCHEMA_VERSION``: the caller opened it
    through its backend, which migrates) into a new store at ``target``, atomically
    (``create_store``: a PostgreSQL store holding a fleet is refused unless ``force``). The
    event log keeps its ``seq``, so an audit of the copy reads the same record. Rows per
    table."""
    counts: dict[str, int] = {}

    def fill(conn: Connection) -> None:
        with source.snapshot() as src:
            for table in metadata.sorted_tables:
                if table is generations:  # made by the triggers as the others are copied
                    continue
                counts[table.name] = 0
                result = src.execute(select(table).order_by(*table.primary_key.columns))
                while rows := result.fetchmany(_COPY_CHUNK):
                    conn.execute(table.insert(), [dict(r._mapping) for r in rows])
                    counts[table.name] += len(rows)
        continue_sequences(conn)

    create_store(target, fill, force)
    return counts


def _create_file(path: Path, fill: Callable[[Connection], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        db = Database.sqlite(sqlite3.connect(tmp, isolation_level=None), str(tmp))
        try:
            with db.tx() as conn:
                metadata.create_all(conn)
                fill(conn)
        finally:
            db.close()
        os.replace(tmp, path)
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: The advisory lock (its key) every creation of a store takes first: two ``fleet init`` at
#: once on one database take turns, so the second finds the first's fleet and is refused
#: naming ``force``, instead of both making the same tables at once.
_CREATE_LOCK = text("SELECT pg_advisory_xact_lock(hashtext('trainctl.create_store'))")


def _create_postgresql(url: str, fill: Callable[[Connection], None], force: bool) -> None:
    db = open_postgresql(url)
    try:
        with db.tx() as conn:
            conn.execute(_CREATE_LOCK)  # held until this transaction ends
            if inspect(conn).has_table("meta"):
                if not force:
                    raise PermanentError(
                        f"force: a fleet already exists at {url}; pass --force to replace it",
                        field="force",
                    )
                metadata.drop_all(conn)
            metadata.create_all(conn)
            fill(conn)
    finally:
        db.close()


__all__ = [
    "StoreUnavailable",
    "connect",
    "copy_store",
    "create_store",
    "open_postgresql",
    "open_store",
    "peek_meta",
]
