"""trainctl's own record of a Slurm cluster, in the fleet store's SQLite tables.

Slurm holds node states and jobs; it does not hold what trainctl must prove afterwards: which
versions each node carries, who holds it for what, when it was last visited, and the
append-only event log the audit replays. Those live in the same tables as the simulated fleet
(``sqlite_schema.SCHEMA``: ``meta``, ``clusters``, ``hosts``, ``events``), so ``trainctl audit``,
the metrics collector and every reader of the fleet file work unchanged; ``meta.backend`` says
``slurm``. Writes name their columns, so columns the simulated fleet adds later stay NULL here.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.fleet.fleet_id import META_KEY as FLEET_ID_KEY
from orchestrator.fleet.fleet_id import new_fleet_id
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.sqlite_schema import SCHEMA, SCHEMA_VERSION

BACKEND = "slurm"
_HOST_COLUMNS = (
    "name",
    "cluster",
    "zone",
    "rack",
    "state",
    "versions",
    "job_id",
    "reason",
    "owner",
    "last_visit",
    "verified",
    "updates",
)


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
    cluster: str,
    hosts: Iterable[HostRec],
    meta: Mapping[str, str],
    wall: datetime | None = None,
) -> None:
    """Write a new record for ``cluster`` to a temporary file, then move it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        conn.executescript(SCHEMA)
        conn.execute("BEGIN")
        full = {
            "backend": BACKEND,
            "schema_version": str(SCHEMA_VERSION),
            "anchor_wall": (wall or datetime.now(UTC)).isoformat(),
            "speed": "1.0",
            "cluster": cluster,
            FLEET_ID_KEY: new_fleet_id(),
            **meta,
        }
        conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(full.items()))
        conn.execute("INSERT INTO clusters VALUES (?, ?)", (cluster, json.dumps({"targets": {}})))
        conn.execute("INSERT INTO clocks VALUES (?, 0.0)", (cluster,))
        save_hosts(conn, cluster, hosts)
        conn.execute("COMMIT")
        conn.close()
        os.replace(tmp, path)
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=120000")
    return conn


def load_hosts(conn: sqlite3.Connection, cluster: str) -> list[HostRec]:
    rows = conn.execute(
        f"SELECT {', '.join(_HOST_COLUMNS)} FROM hosts WHERE cluster=? ORDER BY name", (cluster,)
    )
    return [
        HostRec(
            name=r[0],
            zone=r[2],
            rack=r[3],
            state=r[4],
            versions=json.loads(r[5]),
            job_id=r[6],
            reason=r[7],
            owner=r[8],
            last_visit=r[9],
            verified=bool(r[10]),
            updates=r[11],
        )
        for r in rows
    ]


def save_hosts(conn: sqlite3.Connection, cluster: str, hosts: Iterable[HostRec]) -> None:
    marks = ",".join("?" * len(_HOST_COLUMNS))
    conn.executemany(
        f"INSERT OR REPLACE INTO hosts ({', '.join(_HOST_COLUMNS)}) VALUES ({marks})",
        [
            (
                h.name,
                cluster,
                h.zone,
                h.rack,
                str(h.state),
                json.dumps(h.versions),
                h.job_id,
                h.reason,
                h.owner,
                h.last_visit,
                int(h.verified),
                h.updates,
            )
            for h in hosts
        ],
    )


def load_state(conn: sqlite3.Connection, cluster: str) -> dict[str, Any]:
    row = conn.execute("SELECT state FROM clusters WHERE name=?", (cluster,)).fetchone()
    return dict(json.loads(row[0])) if row else {"targets": {}}


def save_state(conn: sqlite3.Connection, cluster: str, state: Mapping[str, Any]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO clusters VALUES (?, ?)", (cluster, json.dumps(dict(state)))
    )
