"""An operation's take step, beside the train's (``take.py``): plan, cut a wave, cordon it.

An operation runs the waves planned when it began (``planned``): ``take_wave`` plans the rest of
the cluster as it is now, takes the first planned wave still holding hosts to change
(``wave_pacing.follow_planned``: hosts that failed or went to repair drop out, hosts handed
back or back from repair join the last wave or one more) and cordons it in one transaction,
with the budget check of every cordon. Runs recorded before planned waves (and operations with
a ``batch`` policy, whose sizes the planner does not know) cut each wave from the plan of the
rest as it is now (``planned`` None).

A wave is planned once per decision point. ``plan_scope`` is the one whole-scope planning call
(``ops plan``/``ops start`` preview it, the operation's ``ops_check`` repeats it when the
workflow begins, on the fleet as it is then). Within a cluster, ``PlanMemo`` keeps the last plan
made for an operation with what it was made from: the next step (pre-staging after the first
look, cutting the wave after the arbiter answered) takes that plan when its planning inputs are
the same (the spec as capped, the fleet hour, hosts and jobs), and plans again only when they
differ: the planner is a function of them (a job's end or checkpoint relative to the fleet hour
decides the packing), so a plan of another fleet hour would take other hosts.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orchestrator.contracts.backend import ClusterBackend, FleetBackend
from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.models import HostState
from orchestrator.contracts.ops_spec import OperationSpec, resolve_clusters
from orchestrator.contracts.ops_types import ClusterPlanView, PrestageResult, TakenWave
from orchestrator.contracts.views import ClusterSnapshot
from orchestrator.execution.batches import round_up_to_groups
from orchestrator.execution.drain import refusing_hosts
from orchestrator.execution.target_checks import held_on_bad_version
from orchestrator.execution.wave_pacing import Followed, follow_planned
from orchestrator.planning.ops_plan import (
    OperationPlan,
    holders_in,
    plan_operation,
    without_grants,
)

S = HostState


def plan_one(
    spec: OperationSpec, snap: ClusterSnapshot, since: float | None = None, grant: int | None = None
) -> OperationPlan | None:
    """Plan ``spec`` on one cluster (begun at fleet hour ``since``, waves of the arbiter's
    ``grant`` if given); None when none of the scope's hosts are in it."""
    try:
        grants = None if grant is None else {snap.name: grant}
        return plan_operation(spec, {snap.name: snap}, since=since, grants=grants)
    except ValueError:
        return None  # the scope's zone/rack/host patterns name nothing here


@dataclass(frozen=True)
class ScopePlan:
    """The whole-scope plan and what it was made from."""

    clusters: list[str]
    snapshots: dict[str, ClusterSnapshot]
    plan: OperationPlan


def plan_scope(
    fleet: FleetBackend,
    spec: OperationSpec,
    wall: datetime | None = None,
    check: Callable[[list[str], dict[str, ClusterSnapshot]], None] | None = None,
) -> ScopePlan:
    """Peek each cluster of the scope (read-only) at ``wall`` and plan it, serialised after the
    campaigns holding hosts now; ValueError naming ``scope`` when it names nothing.

    ``check`` (the CLI's refusals before any plan: bad versions, skew, budget) runs on the
    clusters and snapshots before planning. The CLI's preview and the operation's check both
    plan by this one call.
    """
    names = resolve_clusters(spec.scope, fleet.cluster_names())
    snaps = {n: fleet.peek(n, wall).snapshot() for n in names}
    if check is not None:
        check(names, snaps)
    return ScopePlan(names, snaps, plan_operation(spec, snaps, holders_in(snaps.values())))


# ------------------------------------------------------------------ one plan per decision
def _planning_key(snap: ClusterSnapshot) -> tuple[Any, ...]:
    """What of a snapshot the planner reads (not its recorded targets: the spec says those)."""
    return (snap.name, snap.now, snap.hosts_total, snap.hosts, snap.jobs)


class PlanMemo:
    """The last plan of each (operation, cluster) with its inputs; shared by a worker's threads.

    ``plan`` is ``plan_one`` that returns the remembered plan when called again with equal
    inputs (the planner is pure: equal inputs, equal plan), or without a grant after a plan
    with one that did not bind (``without_grants``). Plans handed out are read, never changed.
    """

    #: Clusters of operations remembered at most (the least recently planned are dropped).
    SIZE = 64

    def __init__(self) -> None:
        self._last: OrderedDict[Hashable, tuple[tuple[Any, ...], OperationPlan | None]]
        self._last = OrderedDict()
        self._lock = threading.Lock()
        self.planned = 0  # plans actually made (tests and benchmarks count them)
        self.reused = 0

    def plan(
        self,
        owner: str,
        spec: OperationSpec,
        snap: ClusterSnapshot,
        since: float | None = None,
        grant: int | None = None,
    ) -> OperationPlan | None:
        key = (owner, snap.name)
        inputs = (spec, since, grant, _planning_key(snap))
        with self._lock:
            last = self._last.get(key)
        reuse = None
        if last is not None and last[0] == inputs:
            reuse = last[1]
        elif last is not None and grant is None:
            # Cutting the wave after the arbiter answered: the look before planned with the
            # grant; where it did not bind, that plan is the one without it.
            (s0, since0, grant0, key0), plan0 = last
            same = (s0, since0, key0) == (spec, since, inputs[3])
            if same and plan0 is not None and grant0 is not None:
                reuse = without_grants(plan0, spec)
        if reuse is not None:
            with self._lock:
                self.reused += 1
            return reuse
        plan = plan_one(spec, snap, since, grant)
        with self._lock:
            self._last[key] = (inputs, plan)
            self._last.move_to_end(key)
            while len(self._last) > self.SIZE:
                self._last.popitem(last=False)
            self.planned += 1
        return plan

    def forget(self, owner: str, cluster: str) -> None:
        with self._lock:
            self._last.pop((owner, cluster), None)


# ---------------------------------------------------------------------------- steps
def cluster_view(
    b: ClusterBackend,
    memo: PlanMemo,
    owner: str,
    spec: OperationSpec,
    since: float | None,
    grant: int | None,
    planned: list[list[str]] | None = None,
) -> ClusterPlanView:
    """The rest of one cluster's plan as of now, in figures (read-only). With ``planned`` (the
    planned waves not yet run; [] to plan them now) its waves are those (``follow_planned``)."""
    plan = memo.plan(owner, spec, b.snapshot(), since, grant)
    if plan is None:
        return ClusterPlanView(fleet_hours=b.now, planned=planned)
    c = plan.clusters[0]
    view = ClusterPlanView(
        fleet_hours=b.now,
        refused=plan.refused,
        waiting_for_room=c.waiting_for_room,
        limit=max(1, c.budget_limit),
        hosts_in_scope=c.hosts_in_scope,
        already_done=c.already_done,
        deferred=c.deferred,
        deferred_hosts=list(plan.deferred),
        waves_left=len(plan.waves),
        next_wave=len(plan.waves[0].hosts) if plan.waves else 0,
        estimated_hours=plan.estimated_duration_hours,
        recorded_targets={k: b.recorded_targets().get(k) for k in spec.targets},
    )
    if planned is None or plan.refused:
        return view.model_copy(update={"planned": planned})
    followed = _followed(plan, planned, grant)
    view.planned, view.replan = followed.waves, followed.why
    view.waves_left = len(followed.waves)
    view.next_wave = len(followed.waves[0]) if followed.waves else 0
    return view


def planned_hosts(plan: OperationPlan) -> list[list[str]]:
    """Each wave of a one-cluster plan, the hosts it takes (those it asks and hands back too)."""
    return [[*w.hosts, *w.asked] for w in plan.waves]


def _followed(plan: OperationPlan, planned: list[list[str]], grant: int | None) -> Followed:
    """The planned waves as they stand on ``plan``'s hosts to change; ``plan``'s own waves
    (``fresh``) when none is planned or the arbiter's ``grant`` is smaller than a planned wave
    (``plan`` is cut at the grant: the waves that will run, a re-plan the run records)."""
    waves = planned_hosts(plan)
    room = max([grant or 0, *map(len, waves)])  # a wave of ``plan`` may take hosts a train holds
    if not planned or (grant is not None and max(map(len, planned)) > room):
        return Followed(waves, list(range(len(waves))), fresh=True)
    pending = list(dict.fromkeys(h for w in waves for h in w))
    return follow_planned(planned, pending, plan.clusters[0].wave_cap)


def prestage(b: ClusterBackend, memo: PlanMemo, owner: str, spec: OperationSpec) -> PrestageResult:
    """Download the new packages on every in-service host still to change; none goes out."""
    out = PrestageResult(fleet_hours=b.now)
    plan = memo.plan(owner, spec, b.snapshot())
    if plan is not None and spec.kind != "reboot" and spec.targets:
        # The record says what this operation must leave on which hosts: the audit holds
        # a succeeded operation to it.
        waves = [h for w in plan.waves for h in w.hosts]
        scope = sorted({*plan.already_done, *plan.deferred, *waves})
        b.record(
            owner, "operation_scope", None, owner=owner, targets=dict(spec.targets), hosts=scope
        )
    for wave in plan.waves if plan else []:
        for name in wave.hosts:
            if b.host(name).state == S.IN_SERVICE and b.prestage(name, spec.targets, owner):
                out.hosts += 1
    return out


def effective_spec(
    spec: OperationSpec, snap: ClusterSnapshot, max_hold: int
) -> tuple[OperationSpec, int | None, int | None]:
    """The spec with its budget capped by the arbiter's grant, and the per-rack/zone limits.

    A ``consistency: cluster`` cut-over (and a drain-for-repair) goes whole or not at all: its
    window is the explicit grant. A job-consistent operation holds at most ``max_hold`` hosts
    beyond those already out of service, and never more than its own budget allows.
    """
    budget = spec.budget
    if spec.window is not None:
        budget = budget.model_copy(update={"max_unavailable": spec.window.max_unavailable})
    if spec.consistency == "cluster":
        return spec, None, None
    if spec.kind == "drain-for-repair":
        return spec, budget.per_rack, budget.per_zone
    limit = budget.limit(snap.hosts_total)
    down = sum(1 for h in snap.hosts if h.state != S.IN_SERVICE)
    cap = min(limit, down + max_hold)
    if cap < limit:
        capped = budget.model_copy(update={"max_unavailable": cap})
        spec = spec.model_copy(update={"budget": capped, "window": None})
    return spec, budget.per_rack, budget.per_zone


def _others_holding(snap: ClusterSnapshot, owner: str) -> Counter[str]:
    return Counter(
        h.owner
        for h in snap.hosts
        if h.state in HELD_STATES and h.owner != owner and h.owner not in NOT_MAINTENANCE_OWNERS
    )


def take_wave(
    b: ClusterBackend,
    fleet: FleetBackend,
    memo: PlanMemo,
    owner: str,
    spec: OperationSpec,
    max_hold: int,
    since: float | None,
    batch: int | None = None,
    planned: list[list[str]] | None = None,
) -> TakenWave:
    """Cut the next wave from the cluster as it is now and cordon it (inside ``b``'s
    transaction, so every cordon re-checks the budget)."""
    snap = b.snapshot()
    capped, per_rack, per_zone = effective_spec(spec, snap, max_hold)
    plan = memo.plan(owner, capped, snap, since)
    out = TakenWave(fleet_hours=b.now)
    if plan is None:
        return out
    out.limit = max(1, plan.clusters[0].budget_limit)
    if plan.refused or plan.clusters[0].waiting_for_room:
        out.waiting = plan.refused or plan.clusters[0].waiting_for_room or ""
        return out
    held = held_on_bad_version(fleet, dict(capped.targets))
    if held:  # a version marked bad since it started: no new wave until cleared
        out.waiting = held
        return out
    out.waves_left = len(plan.waves)
    # The arbiter's word lags the fleet (a holder reports what it held at its last
    # ask): run alone only once no other campaign holds hosts here, in the fleet itself.
    others = _others_holding(snap, owner)
    if others:
        out.waiting_for = sorted(others)
        out.waiting = "handing over: " + ", ".join(
            f"{o} still holds {n} hosts" for o, n in sorted(others.items())
        )
        return out
    wave = _next_wave(b, snap, plan, spec, batch, out, (planned, max_hold))
    # Planned work of every owner together stays within the maintenance budget, when the
    # spec names one (a window is an explicit grant of its own).
    maint = None
    if spec.window is None and spec.budget.maintenance is not None:
        maint = max(1, spec.budget.maintenance_limit(snap.hosts_total))
    for name in wave:
        h = b.host(name)
        ours = h.owner == owner and h.state in HELD_STATES
        if ours or b.cordon(name, owner, owner, out.limit, per_rack, per_zone, maintenance=maint):
            out.hosts.append(name)
            out.previous[name] = {c: h.versions.get(c, "") for c in spec.targets}
    if wave and not out.hosts:
        out.waiting = (
            f"none of the {len(wave)} hosts of the next wave could be cordoned "
            f"(budget {out.limit}, {b.out_of_service_count()} out of service)"
        )
    # The cordons changed the fleet: the next look plans afresh.
    memo.forget(owner, snap.name)
    return out


def _next_wave(
    b: ClusterBackend,
    snap: ClusterSnapshot,
    plan: OperationPlan,
    spec: OperationSpec,
    batch: int | None,
    out: TakenWave,
    following: tuple[list[list[str]] | None, int] = (None, 0),
) -> list[str]:
    """The hosts of the plan's next wave to cordon now. A job that refused a drain keeps its
    hosts until it may be asked again: they wait for a later wave (``DrainTracker.release``),
    the rest goes now (``out.waiting`` says so when nothing is left). With a ``batch`` policy
    and ``consistency: job`` the wave is rounded up to whole jobs. ``following``: the planned
    waves not yet run (None: none followed) and the arbiter's grant (``_next_planned``)."""
    planned, max_hold = following
    if planned is not None:
        return _next_planned(b, plan, planned, max_hold, out)
    later = refusing_hosts(b, [h for w in plan.waves for h in w.hosts])
    wave = next((hs for w in plan.waves if (hs := [h for h in w.hosts if h not in later])), [])
    if later and not wave:
        out.waiting = f"{len(later)} hosts wait for a job that refused to be drained"
    if batch is not None and spec.consistency == "job":  # a cluster's cut-over is one group
        jobs = {h.name: h.job_id for h in snap.hosts}
        wave = round_up_to_groups(wave, batch, lambda h: h if jobs.get(h) is None else jobs[h])
    return wave


def _next_planned(
    b: ClusterBackend, plan: OperationPlan, planned: list[list[str]], max_hold: int, out: TakenWave
) -> list[str]:
    """The hosts of the first planned wave still holding hosts to change now, less those of a
    job that refused and may not be asked yet; ``out.planned_done`` says how many of the
    ``planned`` waves that runs through (all of them when a fresh plan replaced them)."""
    followed = _followed(plan, planned, max_hold)
    later = refusing_hosts(b, [h for w in followed.waves for h in w])
    for hosts, i in zip(followed.waves, followed.index, strict=True):
        wave = [h for h in hosts if h not in later]
        if wave:
            out.planned_done = len(planned) if followed.fresh else i + 1
            return wave
    if later:
        out.waiting = f"{len(later)} hosts wait for a job that refused to be drained"
    return []
