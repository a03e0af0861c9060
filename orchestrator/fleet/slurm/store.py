"""trainctl's own record of a Slurm cluster, in the fleet store's tables (SQLite or PostgreSQL).

Slurm holds node states and jobs; it does not hold what trainctl must prove afterwards: which
versions each node carries, who holds it for what, when it was last visited, and the
append-only event log the audit replays. Those live in the same tables as the simulated fleet
(``store_schema``: ``meta``, ``clusters``, ``hosts``, ``events``), so ``trainctl audit``,
the metrics collector and every reader of the fleet file work unchanged; ``meta.backend`` says
``slurm``. Host rows are read and written by ``ledger_rows`` (the table's one reader and
writer, for both backends) and a new store is made by ``ledger_files``, as the simulated
fleet's are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, select

from orchestrator.fleet.fleet_id import META_KEY as FLEET_ID_KEY
from orchestrator.fleet.fleet_id import new_fleet_id
from orchestrator.fleet.ledger_files import create_store, peek_meta
from orchestrator.fleet.ledger_rows import save_hosts
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.store_db import upsert
from orchestrator.fleet.store_schema import SCHEMA_VERSION, cluster_locks, clusters, meta
from orchestrator.fleet.store_url import StoreRef

BACKEND = "slurm"


def backend_of(path: StoreRef) -> str:
    """``meta.backend`` of the fleet store at ``path`` (``sim`` when absent or unreadable)."""
    return peek_meta(path, "backend", timeout=30) or "sim"


def new_store(
    path: StoreRef,
    members: Mapping[str, Iterable[HostRec]],
    extra: Mapping[str, str],
    wall: datetime | None = None,
    force: bool = True,
) -> None:
    """Write a new record of ``members`` (cluster name -> its hosts) at ``path``, atomically
    (``ledger_files.create_store``). ``meta.cluster`` names the first, as a fleet of one
    cluster always did."""
    full = {
        "backend": BACKEND,
        "schema_version": str(SCHEMA_VERSION),
        "anchor_wall": (wall or datetime.now(UTC)).isoformat(),
        "speed": "1.0",
        "cluster": next(iter(members)),
        FLEET_ID_KEY: new_fleet_id(),
        **extra,
    }

    def fill(conn: Connection) -> None:
        conn.execute(meta.insert(), [{"key": k, "value": v} for k, v in sorted(full.items())])
        for cluster, hosts in members.items():
            conn.execute(clusters.insert().values(name=cluster, state=json.dumps({"targets": {}})))
            conn.execute(cluster_locks.insert().values(cluster=cluster))
            save_hosts(conn, cluster, hosts)

    create_store(path, fill, force)


def load_state(conn: Connection, cluster: str) -> dict[str, Any]:
    row = conn.execute(select(clusters.c.state).where(clusters.c.name == cluster)).first()
    return dict(json.loads(row[0])) if row else {"targets": {}}


def save_state(conn: Connection, cluster: str, state: Mapping[str, Any]) -> None:
    upsert(conn, clusters, [{"name": cluster, "state": json.dumps(dict(state))}])
