"""Turn an in-memory cluster into the plain views the planner reads."""

from __future__ import annotations

from collections.abc import Collection

from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.planning.train_plan import HostView, JobView


def job_view(sim: ClusterSim, job_id: int) -> JobView:
    j = sim.jobs[job_id]
    now = sim.now
    return JobView(
        id=j.id,
        size=j.size,
        hosts=tuple(j.hosts),
        end_hours=j.end,
        next_checkpoint_hours=j.next_checkpoint(now),
        last_checkpoint_hours=j.last_checkpoint(now),
    )


def snapshot(sim: ClusterSim, due: Collection[str]) -> tuple[list[HostView], dict[int, JobView]]:
    """Host and job views of ``sim``; ``due`` names the hosts still to visit this cycle."""
    hosts = [
        HostView(h.name, h.rack, h.zone, str(h.state), h.owner, h.job_id, h.name in due)
        for h in (sim.hosts[n] for n in sim.order)
    ]
    jobs = {jid: job_view(sim, jid) for jid, j in sim.jobs.items() if j.state == "running"}
    return hosts, jobs
