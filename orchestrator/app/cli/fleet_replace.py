"""Replacing a fleet file (``fleet init --force``, ``demo --force``) safely.

An existing fleet is replaced only with ``--force``; never while a worker's heartbeat in it is
fresh (``fleet.heartbeats``: the worker would go on writing to the deleted file, and all its
work and record would be lost), refused with exit 2 naming ``force`` and the live workers; and
the replaced file is kept beside the new one as ``fleet.db.<UTC time>.bak``, so a mistaken
replace can be undone by moving it back. A PostgreSQL store is replaced under the same rules;
it keeps no copy (back it up with ``pg_dump``, or ``trainctl fleet migrate --to`` a file).
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.app.cli.common import BadInput
from orchestrator.contracts.errors import TemporaryError
from orchestrator.fleet.heartbeats import FRESH_SECONDS, live_workers_at
from orchestrator.fleet.ledger_files import peek_meta
from orchestrator.fleet.store_url import StoreRef, is_url


def make_room(path: StoreRef, force: bool, hint: str = "") -> Path | None:
    """Refuse to replace the fleet at ``path`` (BadInput naming ``force``) without ``force``
    or while a worker uses it; else copy a SQLite file aside and return the copy's path (None:
    no fleet was there, or a PostgreSQL store)."""
    if is_url(path):
        if peek_meta(path, "schema_version") is None and peek_meta(path, "seed") is None:
            return None
    elif not Path(path).exists():
        return None
    if not force:
        raise BadInput(
            f"force: a fleet already exists at {path}; pass --force to replace it{hint}",
            field="force",
        )
    try:
        live = live_workers_at(path)
    except (sqlite3.Error, TemporaryError) as err:
        raise BadInput(
            f"force: cannot tell whether a worker uses {path} ({err}); try again",
            field="force",
        ) from None
    if live:
        named = "; ".join(w.describe() for w in live[:5])
        more = f" and {len(live) - 5} more" if len(live) > 5 else ""
        raise BadInput(
            f"force: {len(live)} worker(s) still use the fleet at {path}: {named}{more}; "
            f"stop them (SIGTERM) first, or wait {FRESH_SECONDS:g}s after one died",
            field="force",
        )
    if is_url(path):
        return None
    return keep_backup(Path(path)) if Path(path).is_file() else None


def keep_backup(path: Path) -> Path:
    """A consistent copy of the fleet file at ``path`` as ``<name>.<UTC time>.bak`` beside it.

    SQLite's backup API copies what the write-ahead log holds too; a file too damaged for it
    (``--force`` is also how a damaged fleet is rebuilt) is copied byte for byte, its log
    beside it.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    bak = path.with_name(f"{path.name}.{stamp}.bak")
    try:
        src = sqlite3.connect(path, timeout=30)
        try:
            dst = sqlite3.connect(bak)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error:
        bak.unlink(missing_ok=True)
        shutil.copy2(path, bak)
        wal = Path(f"{path}-wal")
        if wal.is_file():
            shutil.copy2(wal, Path(f"{bak}-wal"))
    return bak
