"""Turn an in-memory cluster into the plain snapshot the bulk-operation planner reads.

Kept apart from ``ops_plan`` so the planner itself imports no fleet backend: it plans over
snapshots from the SQLite fleet, from the discrete-event simulator, or built by hand in tests.
"""

from __future__ import annotations

from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.planning.ops_plan import ClusterSnapshot, HostSnap
from orchestrator.planning.snapshot import job_view


def snapshot_cluster(sim: ClusterSim) -> ClusterSnapshot:
    """A read-only view of ``sim`` at its ``now``: hosts in inventory order and running jobs."""
    hosts = tuple(
        HostSnap(
            name=h.name,
            zone=h.zone,
            rack=h.rack,
            state=str(h.state),
            job_id=h.job_id,
            versions=dict(h.versions),
            owner=h.owner,
        )
        for h in (sim.hosts[n] for n in sim.order)
    )
    jobs = {jid: job_view(sim, jid) for jid, j in sim.jobs.items() if j.state == "running"}
    return ClusterSnapshot(
        name=sim.name, now=sim.now, hosts_total=len(hosts), hosts=hosts, jobs=jobs
    )
