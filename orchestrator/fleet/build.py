"""Building a simulated cluster from a preset: the one recipe ``SqliteFleet.create`` stores and
the discrete-event simulator runs, so both start from the very same hosts and jobs for a seed."""

from __future__ import annotations

from orchestrator.contracts.models import HostState
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.cluster_sim import ClusterSim, ClusterState, HostRec
from orchestrator.fleet.presets import INITIAL_VERSIONS, Preset
from orchestrator.fleet.topology import Topology


def build_cluster(
    preset: Preset, seed: int, cluster: str | None = None, topo: Topology | None = None
) -> ClusterSim:
    """Cluster ``cluster`` (default: the preset's first) at fleet hour 0, busy with its jobs."""
    name = cluster or preset.cluster_names()[0]
    if name not in preset.cluster_names():
        raise ValueError(f"cluster: unknown cluster {name!r} in preset {preset.name}")
    topo = topo or Topology(preset)
    hosts = []
    for h in topo.hosts_below(name):
        dom = topo.failure_domains(h)
        hosts.append(
            HostRec(h, dom["zone"], dom["rack"], HostState.IN_SERVICE, dict(INITIAL_VERSIONS))
        )
    sim = ClusterSim(
        name, seed, hosts, {}, ClusterState(), preset.max_job_hosts, preset.target_utilisation
    )
    sim.advance(0.0)
    _stagger_jobs(sim, seed)
    return sim


def _stagger_jobs(sim: ClusterSim, seed: int) -> None:
    """Make the initial jobs look mid-flight rather than all started at fleet time zero."""
    for job in sim.jobs.values():
        if job.state == "running":
            r = dyn.rng(seed, sim.name, "stagger", job.id)
            job.start = -r.uniform(0.0, job.work_hours * 0.9)
