"""The simulator's figures: what a campaign cost and achieved, kept apart from how it runs.

The engine runs the train's steps; what it reports is counted here: jobs stopped for
maintenance and the work they lost (read from the fleet's own event log, as ``audit`` reads the
SQLite one, so the figures are the fleet's, not the engine's bookkeeping), hosts running jobs
over time (utilisation), budget taken by outages, hosts visited and quarantined, and the
budget checks. ``Tally.result`` turns it into the ``SimResult`` the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.contracts.models import HostState
from orchestrator.fleet.cluster_sim import ClusterSim, Event
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.result import (
    SimResult,
    lower_bound_after_outages_hours,
    lower_bound_hours,
    visit_interval_summary,
)

S = HostState


@dataclass
class Tally:
    """Running figures of one campaign, from its start at fleet hour ``started``."""

    started: float
    busy: int
    """Hosts running a job as of ``busy_since``; ``busy_area`` integrates it up to then."""
    busy_since: float
    busy_area: float = 0.0
    interruptions: int = 0
    lost_work: float = 0.0
    violations: int = 0
    drain_wait: float = 0.0
    max_out: int = 0
    others_out: int = 0
    """Hosts out of service at the last instant for reasons other than the train's domains."""
    outage_area: float = 0.0
    planner_calls: int = 0
    behind_target_plans: int = 0
    ahead_target_plans: int = 0
    """Plans of a paced train so far ahead of its target that it evicted nothing (``pacing``)."""
    piggybacked: int = 0
    released: int = 0
    #: job negotiation: answers heard by kind, and every maintenance eviction (t, job, lost)
    answers: dict[str, int] = field(default_factory=dict)
    evictions: list[tuple[float, int, float]] = field(default_factory=list)
    visited: set[str] = field(default_factory=set)
    quarantined: set[str] = field(default_factory=set)
    visit_hours: list[float] = field(default_factory=list)
    series: list[tuple[float, int, int]] = field(default_factory=list)

    @classmethod
    def start(cls, sim: ClusterSim) -> Tally:
        """Figures from now on: the log not yet read is counted when ``read`` sees it."""
        unread = sum(map(_busy_change, sim.events))
        return cls(started=sim.now, busy=sim.busy_count() - unread, busy_since=sim.now)

    def read(self, e: Event) -> None:
        """One event of the fleet's log: hosts starting or stopping jobs, maintenance
        interruptions and the work they lost, jobs' answers to a drain."""
        change = _busy_change(e)
        if change:
            self.busy_area += self.busy * (e.t - self.busy_since)
            self.busy_since, self.busy = e.t, self.busy + change
        if e.kind == "job_interrupted":
            if str(e.detail.get("cause", "")).startswith("maintenance:"):
                self.interruptions += 1
                lost = float(e.detail.get("lost_gpu_hours", 0.0))
                self.lost_work += lost
                self.evictions.append((e.t, int(e.detail["job"]), lost))
        elif e.kind == "job_asked":
            answer = str(e.detail.get("answer"))
            self.answers[answer] = self.answers.get(answer, 0) + 1

    def accrue(self, dt: float, waiting: int, buffer: int, limit: int) -> None:
        """``dt`` fleet hours with ``waiting`` hosts draining; outages past the failure
        ``buffer`` (floor minus budget) take budget."""
        if dt <= 0:
            return
        self.drain_wait += dt * waiting
        self.outage_area += dt * min(limit, max(0, self.others_out - buffer))

    def returned(self, hosts: list[str], cycle_hours: float) -> None:
        """Hosts back in service after a visit, ``cycle_hours`` into the cycle."""
        for name in hosts:
            if name not in self.visited:
                self.visit_hours.append(cycle_hours)
            self.visited.add(name)
            self.quarantined.discard(name)  # quarantined earlier, repaired and visited again

    def record(self, now: float, out: int, flight: int, over_budget: bool, series: bool) -> None:
        """The end of an instant: hosts out of service, those in the train's domains, and
        whether the train held more than its budget."""
        self.max_out = max(self.max_out, out)
        self.others_out = out - flight
        if over_budget:
            self.violations += 1
        if series:
            point = (now, out, flight)
            if not self.series or self.series[-1][1:] != point[1:]:
                self.series.append(point)

    def utilisation(self, now: float, hosts: int) -> float:
        """Mean fraction of hosts running a job from the start to ``now``."""
        span = now - self.started
        if span <= 0:
            return self.busy / hosts
        area = self.busy_area + self.busy * (now - self.busy_since)
        return area / (span * hosts)

    def result(
        self,
        sim: ClusterSim,
        cfg: SimConfig,
        run: RunShape,
        wall: float,
    ) -> SimResult:
        """The campaign's ``SimResult`` as of now."""
        in_repair = sum(
            1
            for n in sim.order
            if sim.hosts[n].state == S.IN_REPAIR
            and n not in self.quarantined
            and n not in self.visited
        )
        outage = self.outage_area / sim.now if sim.now > 0 else 0.0
        return SimResult(
            policy=cfg.policy,
            preset=cfg.preset.name,
            cluster=sim.name,
            seed=cfg.seed,
            days=cfg.days,
            domain_size=run.domain_size,
            budget_hosts=run.limit,
            max_unavailable_hosts=run.floor,
            maintenance_work_host_hours=run.work,
            piggybacked_hosts=self.piggybacked,
            released_hosts=self.released,
            visit_interval_hours=visit_interval_summary(self.visit_hours),
            max_wait_hours=cfg.max_wait_hours,
            hosts_total=len(sim.order),
            hosts_visited=len(self.visited),
            hosts_quarantined=len(self.quarantined) + in_repair,
            hosts_in_repair=in_repair,
            complete=run.makespan is not None,
            makespan_hours=run.makespan,
            lower_bound_hours=lower_bound_hours(run.work, run.domain_size, run.limit),
            outage_budget_hosts_mean=outage,
            lower_bound_after_outages_hours=lower_bound_after_outages_hours(
                run.work, run.domain_size, run.limit, outage
            ),
            job_interruptions=self.interruptions,
            lost_work_gpu_hours=self.lost_work,
            drain_wait_host_hours=self.drain_wait,
            budget_violations=self.violations,
            max_out_of_service=self.max_out,
            simulated_hours=sim.now,
            wall_seconds=wall,
            planner_calls=self.planner_calls,
            halted=run.halted,
            domains=run.domains,
            series=self.series if cfg.series else None,
            utilisation=self.utilisation(sim.now, len(sim.order)),
            **self._target(cfg, run),
        )

    def _target(self, cfg: SimConfig, run: RunShape) -> dict[str, Any]:
        """The cycle target's figures, only when the run had one."""
        target = cfg.cycle_target_hours
        if target is None:
            return {}
        met = run.makespan is not None and run.makespan - self.started <= target
        return {
            "cycle_target_hours": target,
            "cycle_target_met": met,
            "behind_target_plans": self.behind_target_plans,
        }


@dataclass(frozen=True)
class RunShape:
    """What the engine knows of the run that the figures do not count themselves."""

    domain_size: int
    limit: int
    floor: int
    work: float
    makespan: float | None
    halted: str | None
    domains: int


def _busy_change(e: Event) -> int:
    """How many hosts an event of the fleet's log set running (+) or stopped (-)."""
    if e.kind not in ("job_start", "job_end", "job_interrupted"):
        return 0
    hosts = e.detail["hosts"]
    n = len(hosts) if isinstance(hosts, list) else int(hosts)
    return n if e.kind == "job_start" else -n
