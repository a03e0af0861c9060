"""Discrete-event simulator: one maintenance campaign over a ``ClusterSim`` in virtual fleet time.

The engine drives the very fleet model the SQLite backend persists (``ClusterSim``: jobs,
checkpoints, failures, repairs, update outcomes) and asks the very planning functions the
Temporal train asks (``train_plan.choose_domain`` / ``train_plan.drain_step``, looked up on the
module at call time, over ``snapshot(sim, due)`` with ``due`` chosen as the train's
``plan_domain`` activity chooses it: hosts not yet visited this cycle, plus every host back from
repair with pending updates). What it adds is a virtual clock and a heap of the train's own future
instants: a drain's decision time, a host's maintenance end, and the instant the planner asked to
be woken at (``DomainPlan.retry_at_hours``). Between two instants it ``advance``s the cluster; it
also stops at every failure, end of quarantine triage and repair end of the cluster, so a host
freed by a failure or handed back by repair is picked up at once.

At each instant, in order: the fleet advances; drains due now evict or find their job ended;
finished maintenance is verified and the host returned (the scheduler then sees it, as the next
fleet operation of the real train would); in-flight hosts whose job is gone start their updates;
and if the pipeline has room the planner is asked for ``domain_size - in_flight`` more hosts.
Cost per instant is O(in-flight hosts) plus one snapshot when the planner is asked, and it is asked
only when something changed.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.cluster_sim import ClusterSim, ClusterState, HostRec
from orchestrator.fleet.sqlite_fleet import _stagger_jobs
from orchestrator.models import GPUS_PER_HOST, CapacityBudget, HostState
from orchestrator.planning import train_plan
from orchestrator.planning.snapshot import job_view, snapshot
from orchestrator.planning.train_plan import REPAIR_RETURN
from orchestrator.presets import INITIAL_VERSIONS, Preset
from orchestrator.simulator.policies import get_policy
from orchestrator.topology import Topology

#: The simulated campaign: a new kernel, BIOS and NIC firmware, so every host has work pending.
DEFAULT_TARGETS: dict[str, str] = {"os": "6.8.0-45", "bios": "3.2", "nic_firmware": "28.41.1000"}
#: Install attempts per host before a transient failure is treated as a broken host (as the
#: train's ``apply_updates`` activity: retries are immediate and cost no extra fleet time).
MAX_ATTEMPTS = 3
ACTOR = "sim-train"
S = HostState
_INF = float("inf")


@dataclass
class SimConfig:
    """One simulated campaign."""

    preset: Preset
    policy: str = "job-aware"
    budget: CapacityBudget = field(default_factory=CapacityBudget)
    domain_size: int | None = None
    """Hosts in flight at once; None means the budget's host limit."""
    days: float = 30.0
    seed: int = 1
    max_wait_hours: float = 4.0
    targets: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    series: bool = False
    cluster: str | None = None
    """Which cluster of the preset to simulate (default: the first; clusters are alike)."""


def build_cluster(preset: Preset, seed: int, cluster: str | None = None) -> ClusterSim:
    """A cluster in memory exactly as ``SqliteFleet.create`` builds and stores it."""
    name = cluster or preset.cluster_names()[0]
    if name not in preset.cluster_names():
        raise ValueError(f"cluster: unknown cluster {name!r} in preset {preset.name}")
    topo = Topology(preset)
    hosts = []
    for h in topo.hosts_below(name):
        dom = topo.failure_domains(h)
        hosts.append(HostRec(h, dom["zone"], dom["rack"], "in_service", dict(INITIAL_VERSIONS)))
    sim = ClusterSim(
        name, seed, hosts, {}, ClusterState(), preset.max_job_hosts, preset.target_utilisation
    )
    sim.advance(0.0)
    _stagger_jobs(sim, seed)
    return sim


def maintenance_work_hours(sim: ClusterSim, targets: dict[str, str]) -> float:
    """Host-hours of maintenance the campaign needs: each host's pending updates plus verify."""
    return sum(
        dyn.maintenance_hours(dyn.pending_components(h.versions, targets))
        for h in sim.hosts.values()
    )


def lower_bound_hours(work_host_hours: float, domain_size: int, budget_hosts: int) -> float:
    """The capacity bound on the makespan: ``work_host_hours / min(domain_size, budget_hosts)``.

    ``work_host_hours`` is the sum over hosts of ``dynamics.maintenance_hours`` of the host's
    pending components (install, one reboot, verification). No policy can have more than
    ``min(domain_size, budget_hosts)`` hosts in maintenance at once, so none can finish sooner,
    even with no job to drain, no failure and no host lost to repair or quarantine eating the
    budget. It ignores that hosts come in whole rounds, so a run with no jobs reaches it within one
    maintenance duration (exactly when the hosts divide evenly into rounds).
    """
    return work_host_hours / max(1, min(domain_size, budget_hosts))


def lower_bound_after_outages_hours(
    work_host_hours: float, domain_size: int, budget_hosts: int, outage_hosts_mean: float
) -> float:
    """The capacity bound of one run once the fleet's own outages have taken their share of the
    budget: ``work_host_hours / min(domain_size, budget_hosts - outage_hosts_mean)``.

    The budget counts hosts out of service for any reason, not only this train's maintenance:
    hosts in repair after a failure, hosts quarantined (in triage, then in repair) and repaired
    hosts waiting for their updates take a share of it that no policy can use.
    ``outage_hosts_mean`` is that share averaged over the run (``outage_budget_hosts_mean``:
    the mean of ``min(budget, hosts out for other reasons)``). While the budget holds, the hosts
    in maintenance number at most ``min(domain_size, budget_hosts - outage(t))`` at every
    instant, a concave function of the outage, so over a run of length T the work done is at
    most ``T * min(domain_size, budget_hosts - outage_hosts_mean)`` (Jensen): no policy meeting
    the same outages can finish sooner (``work_host_hours`` is the campaign's work at its start;
    visiting repaired hosts again only adds to it). It depends on the run (the outages a
    campaign meets grow with its length and with the quarantines its own visits cause), so it
    is reported next to ``lower_bound_hours``, the issue's fixed bound, never instead of it; it
    equals that bound when nothing else is out of service.
    """
    room = min(float(domain_size), budget_hosts - outage_hosts_mean)
    return work_host_hours / max(1.0, room)


@dataclass
class _Visit:
    """A host the train holds: draining (job still on it), updating, or held for its batch."""

    phase: str  # "drain" | "update" | "held"
    comps: list[str]
    job_id: int | None = None
    token: int = 0


@dataclass
class _Drain:
    """One job that in-flight hosts wait for; they share one decision and one eviction."""

    step: train_plan.DrainStep
    deadline: float
    hosts: set[str]
    token: int


@dataclass
class SimResult:
    """What one campaign cost; ``to_json`` is the CLI's JSON object.

    The cycle is complete once every host was visited once: returned to service after passing
    verification (``hosts_visited``), quarantined by the train, or held by the repair shop when
    nothing else is left (it gets its updates when repair hands it back, like ``trainctl demo``,
    ``hosts_quarantined`` counts both, ``hosts_in_repair`` the latter), and no host back from
    repair still waits for its updates (the train's own test of a finished cycle). Quarantine is
    not a visit: a quarantined host that repair hands back during the cycle (in service, or
    waiting for its updates) is due again, and counts as visited once the train has verified it
    (``repair_returns_updated`` counts the hosts taken over from repair with updates pending).
    ``makespan_hours`` is the fleet time from the campaign's start to that moment (None if
    ``days`` ran out first); ``lower_bound_hours`` is the issue's bound and
    ``lower_bound_after_outages_hours`` the same work over the budget the fleet's own outages
    left (see the functions of those names).
    ``job_interruptions`` counts ``job_interrupted`` events caused by maintenance (cause
    ``maintenance:...``); ``lost_gpu_hours`` = work those interruptions lost since the last
    checkpoint (``lost_work_gpu_hours``) + GPU-hours of hosts held cordoned and idle while waiting
    (``idle_held_gpu_hours``: a lockstep batch waiting for its slowest host). ``budget_violations``
    counts instants at which the train held more hosts than the budget, or a cordon of the train
    left more hosts out of service than the budget allows (failures landing on hosts already out
    may push the total above it without the train's doing: ``max_out_of_service`` shows it).
    """

    policy: str
    preset: str
    cluster: str
    seed: int
    days: float
    domain_size: int
    budget_hosts: int
    max_wait_hours: float
    hosts_total: int
    hosts_visited: int
    hosts_quarantined: int
    hosts_in_repair: int
    complete: bool
    makespan_hours: float | None
    lower_bound_hours: float
    """The issue's capacity bound: maintenance work / hosts the budget lets out at once."""
    outage_budget_hosts_mean: float
    """Mean hosts of the budget taken by hosts down for other reasons (repair, quarantine)."""
    lower_bound_after_outages_hours: float
    """Work / (hosts the budget lets out at once - ``outage_budget_hosts_mean``)."""
    job_interruptions: int
    lost_work_gpu_hours: float
    idle_held_gpu_hours: float
    drain_wait_host_hours: float
    budget_violations: int
    max_out_of_service: int
    simulated_hours: float
    wall_seconds: float
    planner_calls: int
    repair_returns_updated: int = 0
    """Hosts back from repair with pending updates that the train took, updated and verified."""
    series: list[tuple[float, int, int]] | None = None

    @property
    def lost_gpu_hours(self) -> float:
        return self.lost_work_gpu_hours + self.idle_held_gpu_hours

    @property
    def makespan_ratio(self) -> float | None:
        """Makespan over the issue's ``lower_bound_hours``."""
        if self.makespan_hours is None or self.lower_bound_hours <= 0:
            return None
        return self.makespan_hours / self.lower_bound_hours

    @property
    def makespan_ratio_after_outages(self) -> float | None:
        """Makespan over ``lower_bound_after_outages_hours``."""
        if self.makespan_hours is None or self.lower_bound_after_outages_hours <= 0:
            return None
        return self.makespan_hours / self.lower_bound_after_outages_hours

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: v for k, v in self.__dict__.items() if k not in ("series",) and v is not None
        }
        out["makespan_hours"] = _r(self.makespan_hours)
        out["lost_gpu_hours"] = _r(self.lost_gpu_hours)
        out["makespan_over_lower_bound"] = _r(self.makespan_ratio, 4)
        out["makespan_over_lower_bound_after_outages"] = _r(self.makespan_ratio_after_outages, 4)
        for k in (
            "lower_bound_hours",
            "lower_bound_after_outages_hours",
            "outage_budget_hosts_mean",
            "lost_work_gpu_hours",
            "idle_held_gpu_hours",
            "drain_wait_host_hours",
            "simulated_hours",
            "wall_seconds",
        ):
            out[k] = _r(out[k])
        if self.series is not None:
            out["series"] = [
                {"t": round(t, 4), "out_of_service": o, "in_maintenance": m}
                for t, o, m in self.series
            ]
        return out


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


class Engine:
    """Runs one campaign; see the module docstring for the order of work at each instant."""

    def __init__(self, sim: ClusterSim, cfg: SimConfig) -> None:
        self.sim, self.cfg = sim, cfg
        self.spec = get_policy(cfg.policy)
        n = len(sim.order)
        self.limit = cfg.budget.limit(n)
        self.domain_size = cfg.domain_size or self.limit
        if self.domain_size < 1:
            raise ValueError("domain_size: must be at least one host")
        self.budget = train_plan.BudgetView(self.limit, cfg.budget.per_rack, cfg.budget.per_zone)
        self.due: set[str] = set(sim.order)
        self.flight: dict[str, _Visit] = {}
        self.drains: dict[int, _Drain] = {}
        self.heap: list[tuple[float, int, str, Any, int]] = []
        self.seq = 0
        self.repairs: list[tuple[float, str]] = []
        self.visited: set[str] = set()
        self.quarantined: set[str] = set()
        self.from_repair: set[str] = set()  # in flight, taken over from the repair pipeline
        self.repair_returns = self.interruptions = self.violations = 0
        self.lost_work = self.idle_held = self.drain_wait = 0.0
        self.max_out = 0
        self.others_out = 0
        self.outage_area = 0.0
        self.planner_calls = 0
        self.dirty = True  # something changed since the planner last answered
        self.series: list[tuple[float, int, int]] = []
        self.makespan: float | None = None
        self.work = maintenance_work_hours(sim, cfg.targets)
        sim.set_targets(cfg.targets, ACTOR)

    # ------------------------------------------------------------------ loop
    def run(self) -> SimResult:
        start = time.perf_counter()
        sim = self.sim
        horizon = self.cfg.days * 24.0
        last = sim.now
        self._instant()
        while self.makespan is None:
            t = min(
                self.heap[0][0] if self.heap else _INF,
                sim.state.next_failure_at,
                self.repairs[0][0] if self.repairs else _INF,
            )
            if t > horizon:
                self._accrue(horizon - last)
                sim.advance(horizon)
                break
            self._accrue(t - last)
            last = t
            sim.advance(t)
            self._instant()
        return self._result(time.perf_counter() - start)

    def _accrue(self, dt: float) -> None:
        if dt <= 0:
            return
        held = sum(1 for v in self.flight.values() if v.phase == "held")
        waiting = sum(1 for v in self.flight.values() if v.phase == "drain")
        self.idle_held += dt * held * GPUS_PER_HOST
        self.drain_wait += dt * waiting
        # Budget taken by hosts down for other reasons (repair, quarantine, awaiting hand-back).
        self.outage_area += dt * min(self.limit, self.others_out)

    def _instant(self) -> None:
        sim = self.sim
        now = sim.now
        self._absorb()
        returned = False
        while self.heap and self.heap[0][0] <= now:
            _, _, kind, key, token = heapq.heappop(self.heap)
            if kind == "drain":
                self._drain_due(key, token)
            elif kind == "done":
                returned |= self._maintenance_done(key, token)
            else:  # "tick": the planner asked to be woken
                self.dirty = True
        while self.repairs and self.repairs[0][0] <= now:
            _, name = heapq.heappop(self.repairs)
            self.dirty = True
            until = sim.hosts[name].repair_until
            if until is not None and until > now:  # triage done: the repair itself starts
                heapq.heappush(self.repairs, (until, name))
        if returned:
            sim.advance(now)  # the scheduler sees returned hosts before the train asks for more
            self._absorb()
        self._scan_flight()
        self._plan()
        self._scan_flight()
        self._check_complete()
        self._record()

    def _push(self, t: float, kind: str, key: Any, token: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, key, token))

    def _absorb(self) -> None:
        """Read the fleet's new events: maintenance interruptions, failures, repairs."""
        events = self.sim.events
        for e in events:
            if e.kind == "job_interrupted":
                self.dirty = True
                if str(e.detail.get("cause", "")).startswith("maintenance:"):
                    self.interruptions += 1
                    self.lost_work += float(e.detail.get("lost_gpu_hours", 0.0))
            elif e.kind == "failure" and e.host is not None:
                self.dirty = True
                until = self.sim.hosts[e.host].repair_until
                if until is not None:
                    heapq.heappush(self.repairs, (until, e.host))
            elif e.kind == "job_end":
                self.dirty = True
        # The log is only ours to read: drop it so a month of fleet time stays small in memory.
        events.clear()

    # ----------------------------------------------------------- the pipeline
    def _plan(self) -> None:
        if not self.dirty:
            return
        if self.spec.lockstep and self.flight:
            return
        slots = self.domain_size - len(self.flight)
        if slots <= 0:
            return
        sim = self.sim
        hosts, jobs = snapshot(sim, self.due | self._repair_returns())
        self.planner_calls += 1
        plan = train_plan.choose_domain(
            hosts, jobs, sim.now, self.budget, slots, self.cfg.max_wait_hours, self.cfg.policy
        )
        self.dirty = False
        retry = getattr(plan, "retry_at_hours", None)
        if retry is not None and retry > sim.now:
            self._push(retry, "tick", None)
        took_in_service = False
        for name in plan.hosts[:slots]:
            h = sim.hosts[name]
            was_in_service = h.state == S.IN_SERVICE
            if name in self.flight or not sim.cordon(
                name, ACTOR, ACTOR, self.limit, self.budget.per_rack, self.budget.per_zone
            ):
                continue
            took_in_service |= was_in_service
            if not was_in_service:
                self.from_repair.add(name)
            comps = dyn.pending_components(h.versions, self.cfg.targets)
            self.flight[name] = _Visit("drain", comps)
            if h.job_id is not None:
                sim.start_drain(name, ACTOR)
                self._join_drain(name, h.job_id)
        out = len(sim.out_of_service())
        if took_in_service and out > self.limit:
            self.violations += 1

    def _join_drain(self, name: str, job_id: int) -> None:
        sim = self.sim
        visit = self.flight[name]
        visit.job_id = job_id
        drain = self.drains.get(job_id)
        if drain is not None:
            drain.hosts.add(name)
            return
        now = sim.now
        deadline = now + self.cfg.max_wait_hours
        step = train_plan.drain_step(job_view(sim, job_id), now, deadline, self.cfg.policy)
        self.seq += 1
        self.drains[job_id] = _Drain(step, deadline, {name}, self.seq)
        if step.action != "wait_end" and step.at_hours <= now:
            sim.evict(job_id, ACTOR)
            self._absorb()
        else:
            self._push(max(now, step.at_hours), "drain", job_id, self.seq)

    def _drain_due(self, job_id: int, token: int) -> None:
        drain = self.drains.get(job_id)
        if drain is None or drain.token != token:
            return
        sim = self.sim
        job = sim.jobs[job_id]
        still = any(sim.hosts[n].job_id == job_id for n in drain.hosts)
        if not still:
            return
        if drain.step.action == "wait_end":
            # The job is still running (it was requeued and its end moved): ask again.
            step = train_plan.drain_step(
                job_view(sim, job_id), sim.now, drain.deadline, self.cfg.policy
            )
            if step.action == "wait_end" or step.at_hours > sim.now:
                self.seq += 1
                drain.step, drain.token = step, self.seq
                self._push(max(sim.now, step.at_hours), "drain", job_id, self.seq)
                return
        if job.state == "running":
            sim.evict(job_id, ACTOR)
            self._absorb()

    def _scan_flight(self) -> None:
        """Drop hosts a failure took from us; start updates on hosts whose job is gone."""
        sim = self.sim
        for name, visit in list(self.flight.items()):
            h = sim.hosts[name]
            if h.owner != ACTOR:  # failed while cordoned: the repair pipeline owns it now
                self._leave_drain(name, visit)
                del self.flight[name]
                self.dirty = True
                continue
            if visit.phase == "drain" and h.job_id is None:
                self._leave_drain(name, visit)
                self._begin(name, visit)

    def _leave_drain(self, name: str, visit: _Visit) -> None:
        if visit.job_id is None:
            return
        drain = self.drains.get(visit.job_id)
        if drain is not None:
            drain.hosts.discard(name)
            if not drain.hosts:
                del self.drains[visit.job_id]
        visit.job_id = None

    def _begin(self, name: str, visit: _Visit) -> None:
        """Install with up to ``MAX_ATTEMPTS`` tries now, as the train's activity does; verify
        when the install time (``dynamics.maintenance_hours``) has passed."""
        sim = self.sim
        if not sim.begin_update(name, ACTOR):
            return
        visit.phase = "update"
        for attempt in range(MAX_ATTEMPTS):
            out = sim.apply_updates(name, self.cfg.targets, ACTOR, str(attempt))
            if out.ok or out.permanent:
                break
        if not out.ok:
            kind = "permanently" if out.permanent else f"{MAX_ATTEMPTS} times"
            self._quarantine(name, f"update of {out.failed_component} failed {kind}")
            return
        self.seq += 1
        visit.token = self.seq
        self._push(sim.now + dyn.maintenance_hours(visit.comps), "done", name, self.seq)

    def _maintenance_done(self, name: str, token: int) -> bool:
        """Verify a host and return it (or quarantine it); True if hosts went back to service."""
        visit = self.flight.get(name)
        if visit is None or visit.token != token:
            return False
        ok, why, _ = self.sim.verify(name, self.cfg.targets, ACTOR)
        if not ok:
            self._quarantine(name, f"verification failed: {why}")
            return False
        if self.spec.lockstep:
            visit.phase = "held"
            return self._release_batch()
        self._return(name)
        return True

    def _release_batch(self) -> bool:
        """Lockstep: return the batch once every host of it is verified (or gone)."""
        if not self.flight or any(v.phase != "held" for v in self.flight.values()):
            return False
        for held in list(self.flight):
            self._return(held)
        return True

    def _repair_returns(self) -> set[str]:
        """Hosts back from repair with pending updates: always due, as for the train (whether
        or not this cycle visited them already: they must not serve before they are updated)."""
        return {n for n, h in self.sim.hosts.items() if h.owner == REPAIR_RETURN}

    def _return(self, name: str) -> None:
        self.sim.return_to_service(name, ACTOR)
        del self.flight[name]
        self.due.discard(name)
        self.visited.add(name)
        self.quarantined.discard(name)  # quarantined earlier, back from repair and updated now
        if name in self.from_repair:
            self.from_repair.discard(name)
            self.repair_returns += 1
        self.dirty = True

    def _quarantine(self, name: str, reason: str) -> None:
        self.sim.quarantine(name, ACTOR, reason)
        until = self.sim.hosts[name].repair_until
        if until is not None:  # triage, then repair: it may come back for its updates
            heapq.heappush(self.repairs, (until, name))
        del self.flight[name]
        # Not a visit (as for the train): the host stays due, so once repair gives it back,
        # in service or waiting for its updates, the train visits it again this cycle.
        self.from_repair.discard(name)
        self.quarantined.add(name)
        self.dirty = True
        if self.spec.lockstep and self._release_batch():
            self.sim.advance(self.sim.now)
            self._absorb()

    def _check_complete(self) -> None:
        """The cycle is complete when every host was visited, or is quarantined or held by the
        repair shop, and no host back from repair waits for its updates (the train's test)."""
        if self.flight or len(self.due) > 256:
            return
        held = (S.IN_REPAIR, S.QUARANTINED)
        if all(self.sim.hosts[n].state in held for n in self.due) and not any(
            h.owner == REPAIR_RETURN for h in self.sim.hosts.values()
        ):
            self.makespan = self.sim.now

    def _record(self) -> None:
        out = len(self.sim.out_of_service())
        self.max_out = max(self.max_out, out)
        self.others_out = out - len(self.flight)
        if len(self.flight) > self.limit:
            self.violations += 1
        if self.cfg.series:
            point = (self.sim.now, out, len(self.flight))
            if not self.series or self.series[-1][1:] != point[1:]:
                self.series.append(point)

    def _result(self, wall: float) -> SimResult:
        sim = self.sim
        in_repair = sum(
            1 for n in self.due if sim.hosts[n].state == S.IN_REPAIR and n not in self.quarantined
        )
        outage = self.outage_area / sim.now if sim.now > 0 else 0.0
        return SimResult(
            policy=self.cfg.policy,
            preset=self.cfg.preset.name,
            cluster=sim.name,
            seed=self.cfg.seed,
            days=self.cfg.days,
            domain_size=self.domain_size,
            budget_hosts=self.limit,
            max_wait_hours=self.cfg.max_wait_hours,
            hosts_total=len(sim.order),
            hosts_visited=len(self.visited),
            hosts_quarantined=len(self.quarantined) + in_repair,
            hosts_in_repair=in_repair,
            complete=self.makespan is not None,
            makespan_hours=self.makespan,
            lower_bound_hours=lower_bound_hours(self.work, self.domain_size, self.limit),
            outage_budget_hosts_mean=outage,
            lower_bound_after_outages_hours=lower_bound_after_outages_hours(
                self.work, self.domain_size, self.limit, outage
            ),
            job_interruptions=self.interruptions,
            lost_work_gpu_hours=self.lost_work,
            idle_held_gpu_hours=self.idle_held,
            drain_wait_host_hours=self.drain_wait,
            budget_violations=self.violations,
            max_out_of_service=self.max_out,
            simulated_hours=sim.now,
            wall_seconds=wall,
            planner_calls=self.planner_calls,
            repair_returns_updated=self.repair_returns,
            series=self.series if self.cfg.series else None,
        )


def simulate(cfg: SimConfig, sim: ClusterSim | None = None) -> SimResult:
    """Run one campaign on a fresh cluster built from ``cfg`` (or on ``sim`` if given)."""
    get_policy(cfg.policy)
    if cfg.days <= 0:
        raise ValueError("days: must be above 0")
    if cfg.domain_size is not None and cfg.domain_size < 1:
        raise ValueError("domain_size: must be at least one host")
    cluster = sim or build_cluster(cfg.preset, cfg.seed, cfg.cluster)
    return Engine(cluster, cfg).run()
