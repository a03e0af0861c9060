"""A ``ClusterSim`` to and from its rows in the fleet file.

The in-memory cluster (``cluster_sim``) knows nothing of SQLite; the store (``sqlite_fleet``)
knows nothing of a cluster's fields. This module is the one place that maps each to the other:
the cluster's state as JSON in ``clusters``, one row per host (``ledger_rows``, the table's one
reader and writer) and live job, the rack switches'
firmware, and the events the cluster appended. Saving writes only what the cluster marked dirty,
so a transaction that touched three hosts writes three host rows.
"""

from __future__ import annotations

import json
import sqlite3

from orchestrator.contracts.errors import UnknownCluster
from orchestrator.fleet.cluster_sim import ClusterSim, ClusterState, JobRec
from orchestrator.fleet.event_log import append_events
from orchestrator.fleet.ledger_rows import load_hosts, save_hosts
from orchestrator.fleet.presets import Preset


def load_cluster(conn: sqlite3.Connection, name: str, seed: int, preset: Preset) -> ClusterSim:
    """Cluster ``name`` as it was last saved (not advanced: the caller moves it to its time)."""
    row = conn.execute("SELECT state FROM clusters WHERE name=?", (name,)).fetchone()
    if row is None:
        raise UnknownCluster(f"cluster: unknown cluster {name!r}", field="cluster")
    state = ClusterState(**json.loads(row[0]))
    hosts = load_hosts(conn, name)
    jobs = {
        r[1]: JobRec(r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8], r[9], r[10], r[11])
        for r in conn.execute(
            "SELECT * FROM jobs WHERE cluster=? AND state!='done' ORDER BY id", (name,)
        )
    }
    sim = ClusterSim(
        name,
        seed,
        hosts,
        jobs,
        state,
        preset.max_job_hosts,
        preset.target_utilisation,
    )
    rows = conn.execute(
        "SELECT name, firmware FROM switches WHERE cluster=? AND tier='rack'", (name,)
    )
    sim.switches.update(dict(rows.fetchall()))
    return sim


def save_cluster(conn: sqlite3.Connection, sim: ClusterSim, new: bool = False) -> None:
    """Write what ``sim`` changed since it was loaded (every row when ``new``) and append its
    events; the caller's transaction commits it. Clears the changes it wrote."""
    s = sim.state
    conn.execute(
        "INSERT OR REPLACE INTO clusters VALUES (?, ?)",
        (
            sim.name,
            json.dumps(
                {
                    "now": s.now,
                    "job_seq": s.job_seq,
                    "fail_seq": s.fail_seq,
                    "next_failure_at": s.next_failure_at,
                    "queue": s.queue,
                    "targets": s.targets,
                    "faults": s.faults,
                    "job_behaviours": s.job_behaviours,
                    "piggyback": s.piggyback,
                    "job_refusals": s.job_refusals,
                    "reimage": s.reimage,
                }
            ),
        ),
    )
    names = sim.order if new else sorted(sim.dirty_hosts)
    save_hosts(conn, sim.name, (sim.hosts[n] for n in names))
    job_ids = list(sim.jobs) if new else sorted(sim.dirty_jobs)
    conn.executemany(
        "INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                sim.name,
                j.id,
                j.size,
                j.work_hours,
                j.ckpt_hours,
                j.submitted,
                json.dumps(j.hosts),
                j.start,
                j.driver,
                j.cuda,
                j.state,
                j.interruptions,
            )
            for j in (sim.jobs[i] for i in job_ids)
        ],
    )
    conn.executemany(
        "UPDATE switches SET firmware=? WHERE name=?",
        [(sim.switches[n], n) for n in sorted(sim.dirty_switches)],
    )
    sim.dirty_switches.clear()
    append_events(conn, sim.name, sim.events)
    sim.events.clear()
    sim.dirty_hosts.clear()
    sim.dirty_jobs.clear()
