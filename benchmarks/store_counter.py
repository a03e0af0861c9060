"""What one process writes to its fleet store, counted where it is sent: every SQLAlchemy engine
of the process (the store's and the heartbeats', SQLite or PostgreSQL) reports each statement
and each commit, and a thread dumps the counts to a JSON file twice a second and at exit.

``bench_store_cycle.py`` starts each worker as ``trainctl worker`` with this installed first:

    python -c "import store_counter; store_counter.install(OUT); ...entrypoint()" worker ...

Counted: write statements (INSERT, UPDATE, DELETE, and a batch of them sent as one), the rows
they changed (the driver's ``rowcount``), and the transactions that committed at least one
write. Reads are not counted (SQLite's cluster load bypasses SQLAlchemy's cursor events).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

_WRITES = ("INSERT", "UPDATE", "DELETE")
_lock = threading.Lock()
COUNTS = {"write_statements": 0, "rows_written": 0, "write_transactions": 0, "commits": 0}


def _after(
    conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
) -> None:
    if not statement.lstrip()[:6].upper().startswith(_WRITES):
        return
    rows = max(0, getattr(cursor, "rowcount", 0) or 0)
    conn.info["wrote"] = True
    with _lock:
        COUNTS["write_statements"] += 1
        COUNTS["rows_written"] += rows


def _commit(conn: Any) -> None:
    wrote = bool(conn.info.pop("wrote", False))
    with _lock:
        COUNTS["commits"] += 1
        COUNTS["write_transactions"] += wrote


def _rollback(conn: Any) -> None:
    conn.info.pop("wrote", None)


def snapshot() -> dict[str, int]:
    with _lock:
        return dict(COUNTS)


def _dump(out: Path) -> None:
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(snapshot()))
    tmp.replace(out)


def install(out: str | Path, every: float = 0.5) -> None:
    """Count this process's writes from now on, dumped to ``out`` every ``every`` seconds."""
    path = Path(out)
    event.listen(Engine, "after_cursor_execute", _after)
    event.listen(Engine, "commit", _commit)
    event.listen(Engine, "rollback", _rollback)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            _dump(path)

    def last() -> None:
        stop.set()
        _dump(path)

    threading.Thread(target=loop, name="store-counter", daemon=True).start()
    atexit.register(last)
    _dump(path)


def read(paths: list[Path]) -> dict[str, int]:
    """The counts of several processes, summed (a file not written yet counts nothing)."""
    total = dict.fromkeys(COUNTS, 0)
    for p in paths:
        try:
            counts = json.loads(p.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        for k in total:
            total[k] += int(counts.get(k, 0))
    return total
