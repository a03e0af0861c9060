"""Discrete-event simulator: one maintenance train over a ``ClusterSim`` in virtual fleet time.

It runs the live train's own steps, not a model of them: the same execution core
(``orchestrator.execution``: ``take_domain`` to plan and cordon, the one drain sequence
``drain_sequence`` to drain, install, verify and settle, interpreted by ``sim_domains`` as
``DomainMaintenance`` interprets it, ``cycle_complete`` and the halting rule) over the same fleet
model the SQLite backend persists. What it adds is a virtual clock and a heap of instants:

- a domain looks at its drain again at the instant its ``DrainTracker`` asked to be woken;
- a batch of hosts is verified once its install time (the longest of the batch) has passed;
- the train plans again when a batch settles or a domain ends (the live train is signalled),
  at the planner's ``retry_at_hours``, or ``cycle.POLL_FLEET_HOURS`` after it last planned (the live
  train's poll), never in between: a job ending on a due host is noticed when the train would
  notice it.

Between two instants it ``advance``s the cluster; it also stops at every failure and repair end
of the cluster, to account outages and the budget. Every policy runs the live train's pipeline
(``policies``): ``simulate --policy P`` decides as ``train start`` with ``policy: P`` does.

With a fixed horizon (``SimConfig.horizon_hours``, ``simulate --horizon``) the run lasts that
long whatever happens: a completed cycle starts the next at once (``finish_cycle``), new targets
arrive on the heap (``target_every_hours``), the cluster's scheduler backfills EASY and charges
restarts, and ``horizon.HorizonLog`` and ``goodput.Goodput`` keep the figures ``yardstick``
judges against the ``none`` policy (no train: nothing ever plans).
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from typing import Any

from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.models import GPUS_PER_HOST, HostState
from orchestrator.execution.cycle import cycle_complete, next_look_hours
from orchestrator.execution.drain import RELEASE_POLICIES, DrainTracker
from orchestrator.execution.drain_sequence import DrainSequence
from orchestrator.execution.halting import BadBuildRule, Counters, HaltRule
from orchestrator.execution.take import Taken, take_domain
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.dynamics import FAILURES_PER_GPU_HOUR
from orchestrator.fleet.sim_records import JobRec
from orchestrator.planning.cost import RestartModel
from orchestrator.planning.resting import VisitRule
from orchestrator.planning.spec_fit import fit_domain
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.goodput import Goodput
from orchestrator.simulator.horizon import HorizonLog
from orchestrator.simulator.pacing import AHEAD, pacing_on
from orchestrator.simulator.policies import NONE, get_policy
from orchestrator.simulator.result import (
    SimResult,
    lower_bound_after_outages_hours,
    lower_bound_hours,
    maintenance_work_hours,
)
from orchestrator.simulator.sim_domains import ACTOR, Domain, DomainSteps
from orchestrator.simulator.tally import RunShape, Tally

#: The id of ``SimConfig.pin_job``'s job (apart from the trace's, which count from 0).
PINNED_JOB = 1_000_000_000
S = HostState
_INF = float("inf")

__all__ = [
    "Engine",
    "SimResult",
    "build_cluster",
    "lower_bound_after_outages_hours",
    "lower_bound_hours",
    "maintenance_work_hours",
    "simulate",
]


class Engine(DomainSteps):
    """Runs one campaign; see the module docstring for when the train acts."""

    def __init__(self, sim: ClusterSim, cfg: SimConfig) -> None:
        # Our own copy: a fixed horizon's new targets replace ``targets`` as the run goes.
        cfg = dataclasses.replace(cfg, targets=dict(cfg.targets))
        self.sim, self.cfg = sim, cfg
        self.spec = get_policy(cfg.policy)
        self.none = cfg.policy == NONE
        self.horizon: HorizonLog | None = None
        self.goodput: Goodput | None = None
        if cfg.horizon_hours is not None:
            sim.use_easy(cfg.restart_base_hours, cfg.restart_per_host_hours)
            model = RestartModel(
                cfg.restart_base_hours, cfg.checkpoint_write_hours, cfg.restart_per_host_hours
            )
            pinned = self._pin_job(cfg, model) if cfg.pin_job is not None else None
            self.goodput = Goodput.start(sim, pinned, model)
            self.horizon = HorizonLog(started=sim.now, base_targets=dict(cfg.targets))
        n = len(sim.order)
        self.floor = cfg.budget.require_hosts(n)  # a budget of no host never finishes
        # The maintenance budget: what the train's planned work may hold (``budget_hosts``).
        self.limit = cfg.budget.maintenance_limit(n)
        self.domain_size = cfg.domain_size or self.limit
        if self.domain_size < 1:
            raise ValueError("domain_size: must be at least one host")
        # What a lone live train may hold at once: its arbiter grants at most the maintenance
        # budget, and its planner holds ``min(domain_size, grant)`` (``plan_granted_domain``).
        self.max_held = fit_domain(self.domain_size, self.limit).effective
        self.halt_rule: HaltRule | BadBuildRule = (
            BadBuildRule(sim.change_failure_rate(cfg.targets))
            if cfg.halt_after_failures is None
            else HaltRule(cfg.halt_after_failures, cfg.halt_failure_rate)
        )
        self.halt_counts = Counters()
        self.halted: str | None = None
        self.domains: dict[int, Domain] = {}
        self.domains_run = 0
        self.heap: list[tuple[float, int, str, Any, int]] = []
        self.seq = 0
        self.repairs: list[tuple[float, str]] = []
        self.release = cfg.negotiate and cfg.release_refusing and self.spec.name in RELEASE_POLICIES
        self.tally = Tally.start(sim)
        self.wake = True  # the train plans at the next instant
        self.tick_token = 0
        self.makespan: float | None = None
        self.resume_at = 0.0
        self.work = maintenance_work_hours(sim, cfg.targets)
        self.cycle_started = sim.now
        self.paced = pacing_on(cfg)
        self.resting = False  # the last cycle is complete and no host needs a visit
        if self.none:
            self.wake = False  # no train: nothing ever plans
        else:
            sim.set_targets(cfg.targets, ACTOR)
        if self.horizon is not None and cfg.target_every_hours and not self.none:
            k, every = 1, cfg.target_every_hours
            while sim.now + k * every < cfg.horizon_hours:  # type: ignore[operator]
                self._push(sim.now + k * every, "target", None, k)
                k += 1

    def _pin_job(self, cfg: SimConfig, model: RestartModel) -> int:
        """``pin_job``'s job at the queue's head, placed as soon as its hosts come free. It
        checkpoints at the interval a job tuned to the fleet's failure rate asks for (Young's,
        ``RestartModel.best_interval_hours``), as Llama 3's was."""
        assert cfg.pin_job is not None and cfg.horizon_hours is not None
        hosts, days = cfg.pin_job
        sim = self.sim
        work = max(days * 24.0, cfg.horizon_hours) * 2.0  # outlives the horizon
        mtbf = 1.0 / (hosts * GPUS_PER_HOST * FAILURES_PER_GPU_HOUR)
        interval = model.best_interval_hours(mtbf)
        sim.jobs[PINNED_JOB] = JobRec(PINNED_JOB, hosts, work, interval, sim.now)
        sim.state.queue.insert(0, PINNED_JOB)
        sim.advance(sim.now)
        return PINNED_JOB

    def _stopped(self) -> bool:
        """The run is over: its cycle complete (a fixed horizon runs on)."""
        return self.makespan is not None and self.horizon is None

    # ------------------------------------------------------------------ loop
    def run(self) -> SimResult:
        start = time.perf_counter()
        sim = self.sim
        horizon = self.cfg.days * 24.0
        if self.cfg.horizon_hours is not None:
            horizon = self.cfg.horizon_hours
        last = sim.now
        self._instant()
        while not self._stopped() and not (
            self.halted and not self.domains and self.horizon is None
        ):
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

    def _in_flight(self) -> int:
        return sum(
            len(d.pending) + sum(len(b.hosts) for b in d.batches.values())
            for d in self.domains.values()
        )

    def _held(self) -> int:
        """Hosts of the domains the train still holds: a pending host that failed meanwhile (now
        repair's) stays in its domain's list until the domain looks again, but no longer counts
        against the maintenance budget, which the train may already have used again."""
        hosts = self.sim.hosts
        return sum(
            1
            for d in self.domains.values()
            for name in [*d.pending, *(h for b in d.batches.values() for h in b.hosts)]
            if hosts[name].owner == ACTOR and hosts[name].state in HELD_STATES
        )

    def _accrue(self, dt: float) -> None:
        """Figures over ``dt`` fleet hours of no change. Maintenance budget is taken by hosts
        down for other reasons (repair, quarantine, awaiting hand-back) only past the failure
        buffer between the floor and the budget."""
        waiting = sum(len(d.pending) for d in self.domains.values())
        self.tally.accrue(dt, waiting, self.floor - self.limit, self.limit)
        if self.goodput is not None and dt > 0 and self.domains:
            self._accrue_goodput(dt)

    def _instant(self) -> None:
        now = self.sim.now
        self._absorb()
        looks: list[int] = []
        while self.heap and self.heap[0][0] <= now:
            _, _, kind, key, token = heapq.heappop(self.heap)
            if kind == "drain":
                d = self.domains.get(key)
                if d is not None and d.wake_token == token:
                    looks.append(key)
            elif kind == "done":
                self._batch_done(key, token)
            elif kind == "switch":
                self._switch(key, token)
            elif kind == "target":
                self._new_targets(token)
            elif token == self.tick_token:  # "tick": the train's poll or the planner's retry
                self.wake = True
        while self.repairs and self.repairs[0][0] <= now:
            _, name = heapq.heappop(self.repairs)
            until = self.sim.hosts[name].repair_until
            if until is not None and until > now:  # triage done: the repair itself starts
                heapq.heappush(self.repairs, (until, name))
        for domain_id in looks:
            if domain_id in self.domains:
                self._look(self.domains[domain_id])
        # A plan can start a domain whose hosts settle at once (an install failing for good):
        # the live train is signalled and plans again at the same instant.
        for _ in range(len(self.sim.order)):
            if not self.wake or self.halted or self._stopped() or self.none:
                break
            self._plan()
        self._record()

    def _push(self, t: float, kind: str, key: Any, token: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, key, token))

    def _tx(self) -> ClusterSim:
        """The cluster as the next live activity sees it: each is a transaction that first
        advances the fleet to now (the scheduler places requeued jobs, ...)."""
        self.sim.advance(self.sim.now)
        return self.sim

    def _token(self) -> int:
        self.seq += 1
        return self.seq

    def _absorb(self) -> None:
        """Read the fleet's new events: the figures' (``Tally.read``), and failures and
        quarantines, whose repairs end at instants the engine stops at."""
        events = self.sim.events
        for e in events:
            self.tally.read(e)
            if self.goodput is not None:
                self.goodput.read(e)
            if e.kind == "failure" and e.host is not None:
                until = self.sim.hosts[e.host].repair_until
                if until is not None:
                    heapq.heappush(self.repairs, (until, e.host))
            elif e.kind == "host_state" and e.detail.get("after") == S.QUARANTINED:
                until = self.sim.hosts[e.host].repair_until if e.host else None
                if until is not None and e.host is not None:  # triage, then repair
                    heapq.heappush(self.repairs, (until, e.host))
        # The log is only ours to read: drop it so a month of fleet time stays small in memory.
        events.clear()

    # ------------------------------------------------------------- the train
    def _plan(self) -> None:
        """``ClusterTrain._plan_more``: take hosts, start a domain, check the cycle."""
        self.wake = False
        if self.resume_at > self.sim.now:  # between cycles (``cycle_every_hours``)
            return
        out_before = self.sim.out_of_service_count()
        taken = self._take()
        if taken.cycle_started_hours is not None:  # a host needs a visit: the rest is over
            self.cycle_started, self.resting = taken.cycle_started_hours, False
        self._count_take(taken, out_before)
        self._absorb()
        if taken.hosts:
            self._start_domain(list(taken.hosts))
        elif (
            not self.resting
            and cycle_complete(taken.counts, len(self.domains))
            and self._cycle_done()
        ):
            return
        self._schedule_poll(taken.retry_at_hours)

    def _take(self) -> Taken:
        """The live train's planner step, on the simulated cluster."""
        cfg = self.cfg
        return take_domain(
            self._tx(),
            ACTOR,
            cfg.budget,
            self.cycle_started,
            self.max_held,
            cfg.max_wait_hours,
            cfg.policy,
            known=[h for d in self.domains.values() for h in d.hosts],
            switch_target=cfg.targets.get("switch_firmware"),
            steer_jobs=cfg.steer_jobs,
            cycle_target_hours=cfg.cycle_target_hours,
            # A paced train ahead of its target spares jobs (``pacing.AHEAD``).
            ahead=AHEAD if self.paced else None,
            rule=VisitRule(cfg.targets),
            resting=self.resting,
        )

    def _count_take(self, taken: Taken, out_before: int) -> None:
        """What one plan did, into the tally: hosts checked in place, planner calls, and a
        budget violation if the take put the cluster over its floor or maintenance budget."""
        sim = self.sim
        # Checked hosts count as visited this cycle (a host repaired earlier is no longer
        # quarantined), never as drained: the horizon log tells the two apart.
        self.tally.returned(taken.checked, sim.now - self.cycle_started)
        if self.horizon is not None:
            self.horizon.checked(taken.checked, sim.now)
        self.tally.planner_calls += taken.asked
        self.tally.piggybacked += len(taken.piggybacked)
        self.tally.behind_target_plans += taken.behind_target
        self.tally.ahead_target_plans += taken.ahead_of_target
        out_after = sim.out_of_service_count()
        if taken.hosts and out_after > out_before and out_after > self.floor:
            self.tally.violations += 1
        if taken.hosts and sim.planned_count() > self.limit:
            self.tally.violations += 1

    def _start_domain(self, hosts: list[str]) -> None:
        """A domain of ``hosts`` starts draining (``DomainMaintenance``)."""
        cfg = self.cfg
        self.domains_run += 1
        tracker = DrainTracker(
            self.sim.now + cfg.max_wait_hours,
            negotiate=cfg.negotiate,
            max_refusals=cfg.max_refusals,
            release=self.release,
        )
        rack = "switch_firmware" in cfg.targets  # the switch first, once all are drained
        seq = DrainSequence(list(hosts), tracker, together=rack)
        d = Domain(self.domains_run, list(hosts), seq)
        self.domains[d.id] = d
        self._look(d)

    def _cycle_done(self) -> bool:
        """The cycle is complete: note it; True when the train plans nothing more now."""
        sim = self.sim
        if self.makespan is None:
            self.makespan = sim.now
        if self.horizon is None:
            return True
        # ``ClusterTrain._finish_cycle``: the train rests until a host needs a visit.
        self.horizon.cycle_done(sim.now, self.cycle_started, self.cfg.cycle_target_hours)
        if self.cfg.cycle_every_hours is None:
            self.resting = True
            return False
        # With a cadence the next cycle waits for its instant; the train plans nothing
        # meanwhile (an experiment: the live train rests until a host needs a visit).
        return self._resume(self.cycle_started + self.cfg.cycle_every_hours)

    def _new_targets(self, k: int) -> None:
        """A fixed horizon's ``k``-th new version of each targeted component: a resting train
        plans at once, as the live one woken by ``train reconfigure``."""
        assert self.horizon is not None
        targets = self.horizon.targets(k)
        self.cfg.targets = targets
        self.sim.set_targets(targets, ACTOR)
        self._absorb()
        self.wake = True

    def _resume(self, start: float) -> bool:
        """The next cycle starts at ``start``; True if the train waits for it."""
        self.cycle_started = start + 1e-6
        if start <= self.sim.now:
            return False
        self.resume_at = self.cycle_started
        self.tick_token = self._token()
        self._push(self.resume_at, "tick", None, self.tick_token)
        return True

    def _schedule_poll(self, retry_at: float | None) -> None:
        target = next_look_hours(self.sim.now, retry_at)
        self.tick_token = self._token()
        self._push(target, "tick", None, self.tick_token)

    # ------------------------------------------------------------- figures
    def _record(self) -> None:
        flight = self._in_flight()
        over = flight > self.limit and self._held() > self.limit
        out = self.sim.out_of_service_count()
        self.tally.record(self.sim.now, out, flight, over, self.cfg.series)

    def _result(self, wall: float) -> SimResult:
        run = RunShape(
            self.domain_size,
            self.limit,
            self.floor,
            self.work,
            self.makespan,
            self.halted,
            self.domains_run,
        )
        res = self.tally.result(self.sim, self.cfg, run, wall)
        if self.horizon is not None and self.goodput is not None:
            self.goodput.close(self.sim.now)
            res.horizon_report = self.horizon.report(
                self.sim, self.cfg, self.goodput, self.cycle_started, self.none, self.resting
            )
            if self.paced:
                res.horizon_report["ahead_target_plans"] = self.tally.ahead_target_plans
        return res


def simulate(cfg: SimConfig, sim: ClusterSim | None = None) -> SimResult:
    """Run one campaign on a fresh cluster built from ``cfg`` (or on ``sim`` if given)."""
    get_policy(cfg.policy)
    if cfg.horizon_hours is not None and cfg.horizon_hours <= 0:
        raise ValueError("horizon: must be above 0")
    if cfg.days <= 0:
        raise ValueError("days: must be above 0")
    if cfg.domain_size is not None and cfg.domain_size < 1:
        raise ValueError("domain_size: must be at least one host")
    cluster = sim or build_cluster(cfg.preset, cfg.seed, cfg.cluster)
    return Engine(cluster, cfg).run()
