"""Pure planning of bulk operations (OpsPlanner): a scope split into waves that fit every budget.

``plan_operation`` reads plain snapshots (no I/O, no clock: fleet time is in the snapshots) and
returns an ``OperationPlan`` that a workflow can execute wave by wave: waves of one cluster run
in order, clusters run side by side. How the waves are cut:

- Hosts already on target are ``already_done``; hosts out for repair (quarantined, in repair,
  or back from repair awaiting updates) are ``deferred``: they take the change before they
  return. Everything else of the scope lands in exactly one wave.
- ``consistency: job``: a wave takes at most the budget limit minus the hosts already out of
  service in its cluster, within ``per_rack``/``per_zone`` (a scope host another campaign holds
  now is counted once, among those already out). Running jobs stay whole in one wave whenever
  they fit in one, so one drain covers each; jobs go in order of their end, so later waves meet
  jobs that may well have ended by then; idle hosts fill the gaps. A job larger than a wave is
  split: it is drained at its first wave and restarts on one version.
- ``consistency: cluster`` (and ``drain-for-repair``, whose hosts stay out) put the whole scope
  of a cluster in one wave, only if the window (or budget) admits it all at once; otherwise the
  plan is ``refused`` with what it would take.

Estimates replay the waves on the snapshot's jobs: a wave waits for its jobs as the train's
``drain_step`` would (end within ``drain.max_wait``, else evict after the next checkpoint), then
spends ``dynamics.maintenance_hours`` of its pending components. Idle hosts are assumed to stay
idle until their wave (the scheduler may well fill them meanwhile), so the figures are a
lower bound on waiting and on duration.

The steps live beside this module, each with one job: ``ops_result`` (the plan models and their
summary), ``ops_scope`` (scope patterns, done/deferred/to change), ``ops_packing`` (waves within
the budget, the one-wave check) and ``ops_estimate`` (replaying waves on the jobs). Here they are
put together per cluster and across clusters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.contracts.constants import NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.models import CapacityBudget, HostState
from orchestrator.contracts.ops_spec import OperationSpec, operation_id
from orchestrator.contracts.ui_text import duration, plural
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.planning.blockers import budget_holders
from orchestrator.planning.ops_estimate import (
    Estimate,
    count_range,
    drain_model,
    estimate_waves,
    maintenance_hours_by_host,
)
from orchestrator.planning.ops_packing import NoRoom, Packer, check_one_wave, pack_waves
from orchestrator.planning.ops_result import ClusterPlan, Holder, OperationPlan, Wave
from orchestrator.planning.ops_scope import ScopeFilter, classify

__all__ = [
    "ClusterPlan",
    "Holder",
    "OperationPlan",
    "Wave",
    "holders_in",
    "plan_operation",
    "with_grants",
    "without_grants",
]

IN_SERVICE = HostState.IN_SERVICE
_NOT_HOLDERS = NOT_MAINTENANCE_OWNERS


@dataclass
class _ClusterResult:
    summary: ClusterPlan
    est: Estimate
    done: list[str]
    deferred: list[str]
    split_jobs: int = 0


def room_wait(snap: ClusterSnapshot, limit: int) -> str | None:
    """Why an operation must wait for room, or None: hosts out of service that no train,
    operation or campaign holds (failures, repair, quarantine) fill the budget of ``limit``.

    Hosts a maintenance owner holds are no reason to wait here: they are handed over through
    the cluster's arbiter when the operation's turn comes. Occupancy is today's, so it never
    refuses a plan: a wave waits for room (at most ``max_wait_for_room``), as a train does.
    """
    out = [h for h in snap.hosts if h.state != IN_SERVICE and h.owner in _NOT_HOLDERS]
    if limit <= 0 or len(out) < limit:
        return None
    return (
        f"budget.max_unavailable: {len(out)} hosts out of service in {snap.name} (failures, "
        f"repair, quarantine) fill its budget of {limit}: {budget_holders(out)}"
    )


def _one_wave(spec: OperationSpec) -> bool:
    """Whether a cluster's scope goes in one wave (whole or not at all): grants cut nothing."""
    return spec.consistency == "cluster" or spec.kind == "drain-for-repair"


@dataclass
class _Cut:
    """A cluster's scope cut into waves (``bins``), or why it cannot be (``refused``)."""

    bins: list[list[HostView]]
    limit: int  # the budget's hosts out of service (a one-wave check may settle it)
    cap: int  # the hosts a wave may take
    split: int = 0  # jobs larger than a wave, split across waves
    refused: str | None = None


def _plan_cluster(
    spec: OperationSpec,
    snap: ClusterSnapshot,
    scoped: list[HostView],
    since: float | None,
    grant: int | None = None,
) -> _ClusterResult:
    """Plan one cluster: what is done, deferred and to change, the waves, their estimate."""
    done, deferred, todo = classify(spec, scoped, since)
    down = [h for h in snap.hosts if h.state != IN_SERVICE]
    budget = spec.budget
    if spec.window is not None:
        budget = budget.model_copy(update={"max_unavailable": spec.window.max_unavailable})
    limit = budget.limit(snap.hosts_total)
    maint = maintenance_hours_by_host(spec, todo)
    refused: str | None = None
    waiting = room_wait(snap, limit) if todo else None
    if waiting is not None and spec.max_wait_for_room_hours <= 0:  # asked not to wait
        refused = f"{snap.name}: {waiting}; max_wait_for_room is 0: no waiting for repairs"
        waiting = None
    cap = _wave_cap(spec, limit, down, waiting, grant, bool(todo))
    if refused is None:
        cut = _cut_waves(
            spec, snap, todo, down=down, budget=budget, maint=maint, limit=limit, cap=cap
        )
    else:
        cut = _Cut([], limit, cap, refused=refused)
    wait, model = spec.drain.max_wait_hours, drain_model(spec)
    est = Estimate([])
    if not cut.refused:
        est = estimate_waves(snap, cut.bins, maint, wait, model, cut.cap)
    summary = ClusterPlan(
        cluster=snap.name,
        hosts_total=snap.hosts_total,
        hosts_in_scope=len(scoped),
        out_of_service=len(down),
        budget_limit=cut.limit,
        wave_cap=max(0, cut.cap),
        hosts_to_change=len(todo) + len(deferred),
        already_done=len(done),
        deferred=len(deferred),
        waves=len(est.waves),
        est_hours=round(est.hours, 3),
        refused=cut.refused,
        waiting_for_room=None if cut.refused else waiting,
        granted_hosts=grant,
        jobs_interrupted_range=list(count_range(est.interrupted, est.expected_new)),
    )
    return _ClusterResult(summary, est, done, deferred, cut.split)


def _wave_cap(
    spec: OperationSpec,
    limit: int,
    down: list[HostView],
    waiting: str | None,
    grant: int | None,
    has_todo: bool,
) -> int:
    """How many hosts a wave may take: the budget's room today, or (full today) the room it
    will have once holders hand over, within the arbiter's grant."""
    cap = limit - len(down)
    one_wave = _one_wave(spec)
    if has_todo and not one_wave and cap <= 0 and limit > 0:
        # Full today: holders hand over when its turn comes, outages end; plan the room then.
        unheld = sum(1 for h in down if h.owner in _NOT_HOLDERS)
        cap = limit - unheld if waiting is None else limit
    if grant is not None and not one_wave:  # the arbiter's share: the waves that will run
        cap = min(cap, max(1, grant))
    return cap


def _cut_waves(
    spec: OperationSpec,
    snap: ClusterSnapshot,
    todo: list[HostView],
    *,
    down: list[HostView],
    budget: CapacityBudget,
    maint: dict[str, float],
    limit: int,
    cap: int,
) -> _Cut:
    """Cut the hosts to change into waves of at most ``cap``, or one wave (checked against
    ``budget`` with ``down`` out of service and each host's ``maint`` hours), or refuse."""
    if not todo:
        return _Cut([], limit, cap)
    if _one_wave(spec):
        limit, refused = check_one_wave(spec, snap, todo, down, budget, maint)
        return _Cut([todo], limit, len(todo), refused=refused)
    if cap <= 0:
        refused = (
            f"{snap.name}: budget.max_unavailable allows {plural(limit, 'host')} out of service; "
            f"raise budget.max_unavailable above {len(down)}"
        )
        return _Cut([], limit, cap, refused=refused)
    try:
        bins, split = pack_waves(snap, todo, Packer(cap, budget, down))
    except NoRoom as err:
        return _Cut([], limit, cap, refused=f"{snap.name}: {err}")
    return _Cut(bins, limit, cap, split)


def plan_operation(
    spec: OperationSpec,
    clusters: Mapping[str, ClusterSnapshot],
    holders: Iterable[Holder] = (),
    since: float | None = None,
    grants: Mapping[str, int | None] | None = None,
) -> OperationPlan:
    """Plan ``spec`` over the snapshots of the clusters its scope names.

    ``since`` is the fleet hour at which a running operation began: hosts a reboot operation
    has rebooted since then are done (see ``ops_scope.classify``). ``grants`` are the hosts
    each cluster's capacity arbiter would let the operation hold (None: not asked): waves are
    cut to that size, and each cluster reports it as ``granted_hosts``.

    Raises ValueError naming ``scope`` when the scope (or one of its zone/rack/host patterns)
    matches no host. A plan that cannot be carried out is returned with ``refused`` set and no
    waves, so automation gets the reason and what it would take.
    """
    op_id = operation_id(spec)
    scope = ScopeFilter(spec.scope)
    scoped = {name: scope.hosts(snap) for name, snap in sorted(clusters.items())}
    scope.check(clusters)
    if not any(scoped.values()):
        raise ValueError(f"scope: matches no host in {', '.join(sorted(clusters)) or 'no cluster'}")
    results = [
        _plan_cluster(spec, clusters[n], hosts, since, (grants or {}).get(n))
        for n, hosts in scoped.items()
        if hosts
    ]
    refused = _refusal(results)
    hours = max((r.est.hours for r in results), default=0.0)
    waves = [] if refused else [w for r in results for w in r.est.waves]
    return OperationPlan(
        operation_id=op_id,
        kind=spec.kind,
        consistency=spec.consistency,
        targets=dict(spec.targets),
        fleet_hours=round(max(s.now for s in clusters.values()), 3),
        hosts_total=sum(len(h) for h in scoped.values()),
        hosts_to_change=sum(r.summary.hosts_to_change for r in results),
        waves=waves,
        already_done=[h for r in results for h in r.done],
        deferred=[h for r in results for h in r.deferred],
        clusters=[r.summary for r in results],
        estimated_duration_hours=0.0 if refused else round(hours, 3),
        gpu_hours_out_of_service=round(sum(r.est.gpu_out for r in results), 1),
        gpu_hours_lost=round(sum(r.est.gpu_lost for r in results), 1),
        jobs_affected=sum(len(w.jobs_affected) for w in waves),
        jobs_interrupted=sum(len(w.jobs_interrupted) for w in waves),
        **({} if refused else _ranges(results)),
        conflicts=_conflicts(results, holders, op_id),
        warnings=_warnings(spec, results, None if refused else hours),
        refused=refused,
    )


def _ranges(results: list[_ClusterResult]) -> dict[str, list[Any]]:
    """The estimates as ranges: today's jobs as the waves meet them, plus the new jobs expected
    on hosts idle until their wave (``ops_estimate``); clusters run side by side."""
    today = sum(r.est.interrupted for r in results)
    jobs = count_range(today, sum(r.est.expected_new for r in results))
    low = max((r.est.hours for r in results), default=0.0)
    high = max((r.est.hours + r.est.extra_hours for r in results), default=0.0)
    lost = sum(r.est.gpu_lost for r in results)
    return {
        "jobs_interrupted_range": list(jobs),
        "estimated_duration_range_hours": [round(low, 3), round(min(high, 2 * low + 2), 3)],
        "gpu_hours_lost_range": [round(lost, 1), round(lost, 1)],
    }


def _refusal(results: list[_ClusterResult]) -> str | None:
    """The first cluster's refusal (with how many more clusters refused), or None."""
    refusals = [r.summary.refused for r in results if r.summary.refused]
    if not refusals:
        return None
    return refusals[0] + (f" (and {len(refusals) - 1} more clusters)" if refusals[1:] else "")


def _warnings(spec: OperationSpec, results: list[_ClusterResult], hours: float | None) -> list[str]:
    """Jobs split across waves, and an estimate of ``hours`` (None: refused) past the window."""
    warnings = [
        _split_warning(r.summary.cluster, r.split_jobs, r.summary.wave_cap)
        for r in results
        if r.split_jobs
    ]
    if spec.window is not None and hours is not None and hours > spec.window.duration_hours:
        warnings.append(
            f"estimated ~{duration(hours)} exceeds window.duration "
            f"{duration(spec.window.duration_hours)}"
        )
    return warnings


def _conflicts(results: list[_ClusterResult], holders: Iterable[Holder], op_id: str) -> list[str]:
    """The other holders of the planned clusters' hosts, which the operation waits behind."""
    names = {r.summary.cluster for r in results}
    return sorted(
        f"{h.cluster}: serialised after {h.holder_id} which holds {h.hosts} hosts"
        + (f" ({h.scope})" if h.scope else "")
        for h in holders
        if h.cluster in names and h.holder_id != op_id and h.hosts > 0
    )


def with_grants(
    plan: OperationPlan, spec: OperationSpec, grants: Mapping[str, int | None]
) -> OperationPlan | None:
    """``plan`` (made without grants) as ``plan_operation`` would make it with ``grants``, or
    None when a grant binds and the waves must be cut again.

    A grant only caps a cluster's wave size (``min(cap, max(1, grant))``, never for a one-wave
    cluster): one at least the wave cap leaves every wave as it is, and the plan differs only
    in the ``granted_hosts`` it reports.
    """
    for c in plan.clusters:
        grant = grants.get(c.cluster)
        if grant is not None and not _one_wave(spec) and max(1, grant) < c.wave_cap:
            return None
    clusters = [
        c.model_copy(update={"granted_hosts": grants.get(c.cluster)}) for c in plan.clusters
    ]
    return plan.model_copy(update={"clusters": clusters})


def without_grants(plan: OperationPlan, spec: OperationSpec) -> OperationPlan | None:
    """``plan`` (made with grants) as ``plan_operation`` would make it without, or None when a
    grant may have bound (a cluster's wave cap is its grant): then the waves must be cut again.

    A cap below the grant is the cap the cluster had anyway (``min(cap, max(1, grant))``).
    """
    for c in plan.clusters:
        grant = c.granted_hosts
        if grant is not None and not _one_wave(spec) and c.wave_cap >= max(1, grant):
            return None
    clusters = [c.model_copy(update={"granted_hosts": None}) for c in plan.clusters]
    return plan.model_copy(update={"clusters": clusters})


def holders_in(snapshots: Iterable[ClusterSnapshot]) -> list[Holder]:
    """Campaigns holding hosts right now, read from host owners (until the arbiter answers)."""
    counts: Counter[tuple[str, str]] = Counter(
        (s.name, h.owner) for s in snapshots for h in s.hosts if h.owner not in _NOT_HOLDERS
    )
    return [Holder(owner, cluster, n) for (cluster, owner), n in sorted(counts.items())]


def _split_warning(cluster: str, jobs: int, cap: int) -> str:
    """``c00: 1 running job exceeds a wave of 4 hosts and is split: it is drained ...``."""
    one = jobs == 1
    return (
        f"{cluster}: {plural(jobs, 'running job')} {'exceeds' if one else 'exceed'} a wave of "
        f"{plural(cap, 'host')} and {'is' if one else 'are'} split: "
        f"{'it' if one else 'each'} is drained (ended or evicted) at its first wave and "
        f"{'restarts' if one else 'restart'} on one version"
    )
