"""The clusters a worker process keeps in memory between transactions, while still current.

Every fleet activity opens one transaction on one cluster (``SqliteFleet.cluster``), and
loading a ``meta-24k`` cluster (3,072 host rows, their jobs and state) was half of a worker's
CPU per activity. A process now keeps each cluster it last saved, with the number its save
left in ``generations`` (which triggers on the cluster's tables raise at every write, from any
process or tool). The next transaction on that cluster reuses it only if the number is still
that one: nothing else wrote the cluster meanwhile. Anything else (another worker's write, an
operator's SQL, a failed transaction, a nested one) loads it from its rows as before.

Kept clusters are shared by every store object of the process (activities open one per worker
thread and per activity class), keyed by the store and the cluster, and taken out while a
transaction uses one, so two threads never hold the same object.

A reused cluster must be exactly what a load would make: what a load never sees is dropped
on reuse (finished jobs, hosts freed since the last placing, a restart's phase). With
``TRAINCTL_CHECK_KEPT=1`` (the test suite sets it) every reuse is compared with a fresh load,
and a difference fails the transaction.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection, bindparam, select

from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.store_schema import generations

_GENERATION = select(generations.c.n).where(generations.c.cluster == bindparam("name"))
CHECK_ENV = "TRAINCTL_CHECK_KEPT"


class KeptDiffers(AssertionError):
    """A kept cluster was not what a load makes (a bug in what reuse resets): never reused."""


def generation(conn: Connection, cluster: str) -> int | None:
    """The cluster's write number now (None for a store that has none yet)."""
    row = conn.execute(_GENERATION, {"name": cluster}).first()
    return None if row is None else int(row[0])


class KeptClusters:
    """Clusters kept by this process, each with the generation its last save left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], tuple[int, ClusterSim]] = {}

    def take(self, store: str, conn: Connection, cluster: str) -> ClusterSim | None:
        """The kept ``cluster`` if nothing wrote it since it was kept, ready for reuse; it is
        no longer kept (put it back after the transaction commits)."""
        with self._lock:
            entry = self._kept.pop((store, cluster), None)
        if entry is None:
            return None
        kept_at, sim = entry
        if generation(conn, cluster) != kept_at:
            return None
        _as_loaded(sim)
        return sim

    def put(self, store: str, cluster: str, at: int | None, sim: ClusterSim) -> None:
        if at is None:
            return
        with self._lock:
            self._kept[(store, cluster)] = (at, sim)

    def forget(self, store: str) -> None:
        with self._lock:
            for key in [k for k in self._kept if k[0] == store]:
                del self._kept[key]


def _as_loaded(sim: ClusterSim) -> None:
    """Drop from ``sim`` what a load from the rows would not have."""
    for jid in [j for j, job in sim.jobs.items() if job.state == "done"]:
        del sim.jobs[jid]  # a load reads live jobs only
    sim.freed.clear()
    sim.__dict__.pop("_restart_phase", None)


def check_enabled() -> bool:
    return os.environ.get(CHECK_ENV, "") not in ("", "0")


def fingerprint(sim: ClusterSim) -> dict[str, Any]:
    """What a transaction can see of ``sim``: its state, hosts, live jobs and switches."""
    return {
        "state": json.loads(json.dumps(asdict(sim.state))),
        "hosts": [
            {k: v for k, v in vars(sim.hosts[n]).items() if not k.startswith("_")}
            for n in sim.order
        ],
        "jobs": {
            j: {k: v for k, v in vars(job).items() if not k.startswith("_")}
            for j, job in sorted(sim.jobs.items())
        },
        "switches": dict(sorted(sim.switches.items())),
        "freed": list(sim.freed),
    }


def check_same(kept: ClusterSim, loaded: ClusterSim) -> None:
    a, b = fingerprint(kept), fingerprint(loaded)
    if a != b:
        parts = [k for k in a if a[k] != b[k]]
        raise KeptDiffers(f"kept cluster {kept.name} differs from its rows in {parts}")


#: The process's kept clusters.
KEPT = KeptClusters()
