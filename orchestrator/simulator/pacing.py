"""Pacing a fixed horizon's train to its cycle target (``simulate --horizon --cycle-target``).

The live train starts its next cycle as one completes, every host due again (``finish_cycle``),
so with little pending (after the first cycle only the versions ``--target-every`` brings) it
cycles back to back: 21 cycles in 30 days where a 72 h target asks for about 10, and every cycle
stops the jobs that outlive it once more. A paced train waits until hosts are due: a host is due
once its last visit is older than ``cycle_target - margin``, and the next cycle starts when the
first host (the one visited longest ago) becomes due, every host then due as before.

The margin is what the next cycle needs to reach its last host, taken from the cycles already
run: the makespan of the one just completed if nothing is pending but a visit (a cycle of
reboots and verifications), the longest makespan so far (a cycle of installs, the first one
included) once new versions are pending. So the oldest host is visited again about
``cycle_target`` after its last visit. New versions arriving while the train waits bring the
start forward (``Pacer.start`` again, now with installs pending).

A paced train also keeps to that pace within a cycle, sparing jobs while it is ahead
(``AHEAD``, through ``take_domain``'s ``AheadRule``; ``execution.cycle.project_cycle_end`` the
projection): while its cycle is projected to end within half the target it evicts no job, taking
idle hosts and those jobs free as they end or fail (a 2,048-host job fails every ~3 h); within
0.8 of the target it evicts no job of more than 4 domains' hosts (368 on meta-24k: the 512- to
2,048-host jobs, whose every stop costs a restart on all their GPUs, ~7,000 GPU-h at 2,048 hosts,
for the 92 due hosts a domain takes of them); past that it evicts as before, and sooner once
projected past the target. On meta-24k (seeds 1-4, the yardstick's command) the stops of
job-aware fell from 104-132 to 33-71 and their restarts from 242-303k to 46-105k GPU-h, every
cycle still within 72 h: a cycle of visits alone, which took ~20 h and stopped 5-14 jobs (a
2,048-host one up to 7 times), takes ~30-60 h. Evicting nothing below 0.4 of the target stopped
more jobs than below 0.5 (64-105 stops), evicting nothing below 0.65 or 0.8 changed little on
seed 4; sparing large jobs up to the target itself (no 0.8 limit) cut restarts to 6-48k but let
two cycles of seeds 1-4 each run past 72 h (73-75 h).

Only horizon runs with a cycle target pace (and not with ``--cycle-every``, the fixed-cadence
experiment, nor ``--no-pace``): the live train and every other simulated run start their next
cycle at once and spare no job, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.contracts.models import HostState
from orchestrator.contracts.updates import pending_components
from orchestrator.execution.take import AheadRule
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.horizon import HorizonLog


def pacing_on(cfg: SimConfig) -> bool:
    """Whether this run's train waits for due hosts between cycles."""
    return (
        cfg.pace
        and cfg.horizon_hours is not None
        and cfg.cycle_target_hours is not None
        and cfg.cycle_every_hours is None
        and cfg.policy != "none"
    )


def installs_pending(sim: ClusterSim, targets: Mapping[str, str]) -> bool:
    """Some host in service is not on the targets yet (the next cycle installs)."""
    hosts = sim.hosts
    return any(
        pending_components(hosts[n].versions, targets)
        for n in sim.order
        if hosts[n].state == HostState.IN_SERVICE
    )


#: How a paced train ahead of its target spares jobs (see the module docstring).
AHEAD = AheadRule(no_eviction=0.5, spare_large=0.8, large_domains=4.0)


@dataclass
class Pacer:
    """When the next cycle of a paced train starts (see the module docstring)."""

    target_hours: float

    def margin(self, log: HorizonLog, installs: bool) -> float:
        spans = [c["makespan_hours"] for c in log.cycles if c["complete"]]
        if not spans:
            return self.target_hours
        return max(spans) if installs else spans[-1]

    def start(self, sim: ClusterSim, log: HorizonLog, targets: Mapping[str, str]) -> float:
        """The instant the first host in service becomes due (never before ``sim.now``)."""
        hosts, last = sim.hosts, log.last_visit
        visits = [
            last.get(n, log.started) for n in sim.order if hosts[n].state == HostState.IN_SERVICE
        ]
        if not visits:
            return sim.now
        due_after = self.target_hours - self.margin(log, installs_pending(sim, targets))
        return max(sim.now, min(visits) + due_after)
