"""A ``ClusterSim`` to and from its rows in the fleet file.

The in-memory cluster (``cluster_sim``) knows nothing of the store; the store (``sqlite_fleet``)
knows nothing of a cluster's fields. This module is the one place that maps each to the other:
the cluster's state as JSON in ``clusters``, one row per host (``ledger_rows``, the table's one
reader and writer) and live job, the rack switches'
firmware, and the events the cluster appended. Saving writes only what the cluster marked dirty,
so a transaction that touched three hosts writes three host rows.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, bindparam, select

from orchestrator.contracts.errors import UnknownCluster
from orchestrator.fleet.cluster_sim import ClusterSim, ClusterState, JobRec
from orchestrator.fleet.event_log import append_events
from orchestrator.fleet.ledger_rows import load_hosts, save_hosts
from orchestrator.fleet.presets import Preset
from orchestrator.fleet.store_db import fetch, upsert
from orchestrator.fleet.store_schema import clusters, switches
from orchestrator.fleet.store_schema import jobs as job_rows

_STATE = select(clusters.c.state).where(clusters.c.name == bindparam("name"))
_JOBS = (
    select(job_rows)
    .where(job_rows.c.cluster == bindparam("name"), job_rows.c.state != "done")
    .order_by(job_rows.c.id)
)
_RACKS = select(switches.c.name, switches.c.firmware).where(
    switches.c.cluster == bindparam("name"), switches.c.tier == "rack"
)
_FIRMWARE = (
    switches.update()
    .where(switches.c.name == bindparam("switch"))
    .values(firmware=bindparam("b_firmware"))
)
_JOB_COLUMNS = [c.name for c in job_rows.columns]


def load_cluster(conn: Connection, name: str, seed: int, preset: Preset) -> ClusterSim:
    """Cluster ``name`` as it was last saved (not advanced: the caller moves it to its time)."""
    key = {"name": name}
    row = conn.execute(_STATE, key).first()
    if row is None:
        raise UnknownCluster(f"cluster: unknown cluster {name!r}", field="cluster")
    state = ClusterState(**json.loads(row[0]))
    hosts = load_hosts(conn, name)
    names = {h.name: h.name for h in hosts}  # a job's hosts: the records' own name texts
    jobs = {
        r[1]: JobRec(
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            [names.get(n, n) for n in json.loads(r[6])],
            r[7],
            r[8],
            r[9],
            r[10],
            r[11],
        )
        for r in fetch(conn, _JOBS, key)
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
    sim.switches.update({n: f for n, f in fetch(conn, _RACKS, key)})
    return sim


def save_cluster(conn: Connection, sim: ClusterSim, new: bool = False) -> None:
    """Write what ``sim`` changed since it was loaded (every row when ``new``) and append its
    events; the caller's transaction commits it. Clears the changes it wrote."""
    upsert(conn, clusters, [{"name": sim.name, "state": _state_text(sim.state)}])
    names = sim.order if new else sorted(sim.dirty_hosts)
    save_hosts(conn, sim.name, (sim.hosts[n] for n in names))
    job_ids = list(sim.jobs) if new else sorted(sim.dirty_jobs)
    upsert(conn, job_rows, [_job_row(sim.name, sim.jobs[i]) for i in job_ids])
    if sim.dirty_switches:
        conn.execute(
            _FIRMWARE,
            [{"switch": n, "b_firmware": sim.switches[n]} for n in sorted(sim.dirty_switches)],
        )
    sim.dirty_switches.clear()
    append_events(conn, sim.name, sim.events)
    sim.events.clear()
    sim.dirty_hosts.clear()
    sim.dirty_jobs.clear()


def _state_text(s: ClusterState) -> str:
    """The cluster's own state (clock, queue, targets, faults...) as its ``clusters`` JSON."""
    return json.dumps(
        {
            "now": s.now,
            "job_seq": s.job_seq,
            "fail_seq": s.fail_seq,
            "next_failure_at": s.next_failure_at,
            "queue": s.queue,
            "targets": s.targets,
            "faults": s.faults,
            "job_behaviours": s.job_behaviours,
            "job_comments": s.job_comments,
            "max_quiet_hours": s.max_quiet_hours,
            "piggyback": s.piggyback,
            "job_refusals": s.job_refusals,
            "reimage": s.reimage,
        }
    )


def _job_row(cluster: str, j: JobRec) -> dict[str, object]:
    """One job of ``cluster`` as its ``jobs`` row."""
    return dict(
        zip(
            _JOB_COLUMNS,
            (
                cluster,
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
            ),
            strict=True,
        )
    )
