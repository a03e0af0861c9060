"""The one reader and writer of the ``hosts`` table, for both backends.

Every fleet store keeps its host records in the same table (``store_schema.hosts``), whichever
backend runs the jobs: the simulated fleet (``sqlite_rows``) and the Slurm record
(``slurm.store``) load and save them here, by column name, so a column added later is added in
one place. A field a backend never sets (a Slurm node's ``repair_until``, ``defect``) is stored
as the record holds it (NULL).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import Connection, bindparam, select

from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.store_db import fetch, upsert
from orchestrator.fleet.store_schema import hosts as table

#: The ``hosts`` table's columns, in the order of ``store_schema.hosts``.
HOST_COLUMNS = (
    "name",
    "cluster",
    "zone",
    "rack",
    "state",
    "versions",
    "job_id",
    "reason",
    "owner",
    "repair_until",
    "defect",
    "last_visit",
    "verified",
    "updates",
    "last_boot",
)
_SELECT = (
    select(*(table.c[c] for c in HOST_COLUMNS))
    .where(table.c.cluster == bindparam("cluster"))
    .order_by(table.c.name)
)


def load_hosts(conn: Connection, cluster: str) -> list[HostRec]:
    """Every host record of ``cluster``, by name (= topology order, whatever order the rows
    were written in).

    A worker keeps every cluster it serves in memory (``kept_clusters``) and each activity
    it cannot reuse one for loads all its hosts (3,072 on ``meta-24k``), so this loop is made
    lean: records are made straight into their ``__dict__`` (no ``__setattr__`` per field;
    none is indexed yet); hosts with the same versions text share one decoded dict (an install
    replaces a host's dict, never changes it in place); and the few distinct zone, rack, state,
    owner and reason texts are one object each."""
    decoded: dict[str, dict[str, str]] = {}
    same: dict[str, str] = {}
    one = same.setdefault
    out: list[HostRec] = []
    new = HostRec.__new__
    for r in fetch(conn, _SELECT, {"cluster": cluster}):
        text = r[5]
        versions = decoded.get(text)
        if versions is None:
            versions = decoded[text] = json.loads(text)
        rec = new(HostRec)
        rec.__dict__.update(
            name=r[0],
            zone=one(r[2], r[2]),
            rack=one(r[3], r[3]),
            state=one(r[4], r[4]),
            versions=versions,
            job_id=r[6],
            reason=one(r[7], r[7]),
            owner=one(r[8], r[8]),
            repair_until=r[9],
            defect=r[10],
            last_visit=r[11],
            verified=bool(r[12]),
            updates=r[13],
            last_boot=r[14],
        )
        out.append(rec)
    return out


def save_hosts(conn: Connection, cluster: str, hosts: Iterable[HostRec]) -> None:
    """Write ``hosts`` of ``cluster`` (each row whole); the caller's transaction commits it."""
    upsert(
        conn,
        table,
        [
            dict(
                zip(
                    HOST_COLUMNS,
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
                        h.repair_until,
                        h.defect,
                        h.last_visit,
                        int(h.verified),
                        h.updates,
                        h.last_boot,
                    ),
                    strict=True,
                )
            )
            for h in hosts
        ],
    )


__all__ = ["HOST_COLUMNS", "load_hosts", "save_hosts"]
