"""trainctl's own record of a Slurm cluster, in the fleet store's SQLite tables.

Slurm holds node states and jobs; it does not hold what trainctl must prove afterwards: which
versions each node carries, who holds it for what, when it was last visited, and the
append-only event log the audit replays. Those live in the same tables as the simulated fleet
(``sqlite_schema.SCHEMA``: ``meta``, ``clusters``, ``hosts``, ``events``), so ``trainctl audit``,
the metrics collector and every reader of the fleet file work unchanged; ``meta.backend`` says
``slurm``. Host rows are read and written by ``ledger_rows`` (the table's one reader and
writer, for both backends) and a new file is made by ``ledger_files``, as the simulated
fleet's are.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.fleet.fleet_id import META_KEY as FLEET_ID_KEY
from orchestrator.fleet.fleet_id import new_fleet_id
from orchestrator.fleet.ledger_files import create_file
from orchestrator.fleet.ledger_rows import save_hosts
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.sqlite_schema import SCHEMA_VERSION

BACKEND = "slurm"


def backend_of(path: Path) -> str:
    """``meta.backend`` of the fleet file at ``path`` (``sim`` when absent or unreadable)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return "sim"
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='backend'").fetchone()
    except sqlite3.Error:
        return "sim"
    finally:
        conn.close()
    return str(row[0]) if row else "sim"


def create_store(
    path: Path,
    clusters: Mapping[str, Iterable[HostRec]],
    meta: Mapping[str, str],
    wall: datetime | None = None,
) -> None:
    """Write a new record of ``clusters`` (name -> its hosts) to a temporary file, then move
    it to ``path``. ``meta.cluster`` names the first, as a fleet of one cluster always did."""
    full = {
        "backend": BACKEND,
        "schema_version": str(SCHEMA_VERSION),
        "anchor_wall": (wall or datetime.now(UTC)).isoformat(),
        "speed": "1.0",
        "cluster": next(iter(clusters)),
        FLEET_ID_KEY: new_fleet_id(),
        **meta,
    }

    def fill(conn: sqlite3.Connection) -> None:
        conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(full.items()))
        for cluster, hosts in clusters.items():
            conn.execute(
                "INSERT INTO clusters VALUES (?, ?)", (cluster, json.dumps({"targets": {}}))
            )
            conn.execute("INSERT INTO clocks VALUES (?, 0.0)", (cluster,))
            save_hosts(conn, cluster, hosts)

    create_file(path, fill)


def load_state(conn: sqlite3.Connection, cluster: str) -> dict[str, Any]:
    row = conn.execute("SELECT state FROM clusters WHERE name=?", (cluster,)).fetchone()
    return dict(json.loads(row[0])) if row else {"targets": {}}


def save_state(conn: sqlite3.Connection, cluster: str, state: Mapping[str, Any]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO clusters VALUES (?, ?)", (cluster, json.dumps(dict(state)))
    )
