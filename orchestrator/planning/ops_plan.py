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
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pydantic import BaseModel, Field

from orchestrator import updates as dyn
from orchestrator.constants import NOT_MAINTENANCE_OWNERS, REPAIR_RETURN_OWNER
from orchestrator.models import GPUS_PER_HOST, CapacityBudget, HostState
from orchestrator.ops.spec import OperationSpec, Scope, operation_id
from orchestrator.planning.train_plan import drain_step
from orchestrator.views import ClusterSnapshot, HostView

IN_SERVICE = HostState.IN_SERVICE
_REPAIR_STATES = frozenset({HostState.QUARANTINED, HostState.IN_REPAIR})
_NOT_HOLDERS = NOT_MAINTENANCE_OWNERS


@dataclass(frozen=True)
class Holder:
    """Another campaign (train or operation) holding hosts of a cluster right now."""

    holder_id: str
    cluster: str
    hosts: int
    scope: str = ""


class Wave(BaseModel):
    """Hosts of one cluster taken out, changed, verified and returned together."""

    index: int = Field(description="position among the waves of its cluster, from 0")
    cluster: str
    hosts: list[str]
    jobs_affected: list[int] = Field(default_factory=list)
    jobs_interrupted: list[int] = Field(default_factory=list)
    est_start_hours: float = 0.0  # after the operation starts
    drain_hours: float = 0.0
    est_hours: float = 0.0  # drain wait + maintenance


class ClusterPlan(BaseModel):
    """Per-cluster view: budget in force and what the operation does there."""

    cluster: str
    hosts_total: int
    hosts_in_scope: int
    out_of_service: int
    budget_limit: int
    wave_cap: int
    hosts_to_change: int
    already_done: int
    deferred: int
    waves: int
    est_hours: float
    refused: str | None = None


class OperationPlan(BaseModel):
    """A dry run of an operation; what ``ops plan --json`` prints and the executor runs."""

    operation_id: str
    kind: str
    consistency: str
    targets: dict[str, str]
    fleet_hours: float
    hosts_total: int = Field(description="hosts in the scope")
    hosts_to_change: int = Field(description="hosts in waves plus deferred ones")
    waves: list[Wave]
    already_done: list[str]
    deferred: list[str]
    clusters: list[ClusterPlan]
    estimated_duration_hours: float
    gpu_hours_out_of_service: float
    gpu_hours_lost: float = Field(description="work lost by evictions since a checkpoint")
    jobs_affected: int
    jobs_interrupted: int
    conflicts: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    refused: str | None = None

    def waves_of(self, cluster: str) -> list[Wave]:
        return [w for w in self.waves if w.cluster == cluster]

    def summary(self, max_waves: int = 12) -> str:
        """A few lines for people: scope, estimate, per-cluster budget, the first waves."""
        tgt = " ".join(f"{c}={v}" for c, v in self.targets.items()) or "-"
        in_waves = sum(len(w.hosts) for w in self.waves)
        lines = [
            f"{self.operation_id}: {self.kind} (consistency: {self.consistency}) targets {tgt}",
            f"scope: {_n(self.hosts_total, 'host')} in {_n(len(self.clusters), 'cluster')}; "
            f"{in_waves:,} to change in {_n(len(self.waves), 'wave')}, "
            f"{len(self.already_done):,} already done, "
            f"{len(self.deferred):,} deferred until repaired",
            f"estimate: ~{self.estimated_duration_hours:.1f} h, "
            f"{self.gpu_hours_out_of_service:,.0f} GPU-hours out of service, "
            f"{self.jobs_interrupted} of {self.jobs_affected} jobs interrupted "
            f"({self.gpu_hours_lost:,.0f} GPU-hours of work lost)",
        ]
        for c in self.clusters:
            lines.append(
                f"  {c.cluster}: {_n(c.waves, 'wave')} of up to {c.wave_cap} hosts (budget "
                f"{c.budget_limit}, {c.out_of_service} out of service), ~{c.est_hours:.1f} h"
            )
        for w in self.waves[:max_waves]:
            lines.append(
                f"  wave {w.cluster}#{w.index}: {_n(len(w.hosts), 'host')}, "
                f"{_n(len(w.jobs_affected), 'job')} ({len(w.jobs_interrupted)} interrupted), "
                f"starts +{w.est_start_hours:.1f} h,"
                f" ~{w.est_hours:.1f} h"
            )
        if len(self.waves) > max_waves:
            lines.append(f"  ... {len(self.waves) - max_waves} more waves")
        lines += [f"conflict: {c}" for c in self.conflicts]
        lines += [f"warning: {w}" for w in self.warnings]
        if self.refused:
            lines.append(f"REFUSED: {self.refused}")
        return "\n".join(lines)


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


# ------------------------------------------------------------------ scope
class _ScopeFilter:
    """Zone/rack/host patterns of a scope, remembering which ones matched something."""

    def __init__(self, scope: Scope) -> None:
        self.lists = {"zones": scope.zones, "racks": scope.racks, "hosts": scope.hosts}
        self.hits: dict[str, set[int]] = {k: set() for k in self.lists}
        self._cache: dict[tuple[str, str], bool] = {}

    def _ok(self, field: str, name: str, cluster: str) -> bool:
        patterns = self.lists[field]
        if patterns is None:
            return True
        key = (field, name)
        if key not in self._cache:
            short = name.removeprefix(cluster + "-")
            found = [
                i for i, p in enumerate(patterns) if fnmatchcase(name, p) or fnmatchcase(short, p)
            ]
            self.hits[field].update(found)
            self._cache[key] = bool(found)
        return self._cache[key]

    def hosts(self, snap: ClusterSnapshot) -> list[HostView]:
        if all(v is None for v in self.lists.values()):
            return list(snap.hosts)
        return [
            h
            for h in snap.hosts
            if self._ok("zones", h.zone, snap.name)
            and self._ok("racks", h.rack, snap.name)
            and self._ok("hosts", h.name, snap.name)
        ]

    def check(self, clusters: Iterable[str]) -> None:
        for field, patterns in self.lists.items():
            for i, p in enumerate(patterns or ()):
                if i not in self.hits[field]:
                    where = ", ".join(sorted(clusters))
                    raise ValueError(f"scope.{field}: {p!r} matches nothing in {where}")


# ---------------------------------------------------------------- packing
class _NoRoom(Exception):
    pass


class _Bin:
    """One wave being filled; only hosts now in service count against the budget."""

    def __init__(self) -> None:
        self.hosts: list[HostView] = []
        self.taken = 0
        self.rack: Counter[str] = Counter()
        self.zone: Counter[str] = Counter()

    def add(self, h: HostView) -> None:
        self.hosts.append(h)
        if h.state == IN_SERVICE:
            self.taken += 1
            self.rack[h.rack] += 1
            self.zone[h.zone] += 1


class _Packer:
    """Waves taking at most ``cap`` more hosts, within the per-rack/per-zone limits.

    A host already out of service (held by a train, say) is counted in ``down`` and costs its
    wave nothing more: when the wave comes, its holder will have released it.
    """

    def __init__(self, cap: int, budget: CapacityBudget, down: Sequence[HostView]) -> None:
        self.cap, self.per_rack, self.per_zone = cap, budget.per_rack, budget.per_zone
        self.down_rack = Counter(h.rack for h in down)
        self.down_zone = Counter(h.zone for h in down)
        self.bins: list[_Bin] = []
        self._first_open = 0

    def fits(self, b: _Bin, group: Sequence[HostView]) -> bool:
        group = [h for h in group if h.state == IN_SERVICE]
        if b.taken + len(group) > self.cap:
            return False
        if self.per_rack is not None:
            for rack, k in Counter(h.rack for h in group).items():
                if self.down_rack[rack] + b.rack[rack] + k > self.per_rack:
                    return False
        if self.per_zone is not None:
            for zone, k in Counter(h.zone for h in group).items():
                if self.down_zone[zone] + b.zone[zone] + k > self.per_zone:
                    return False
        return True

    def _open(self) -> _Bin:
        self.bins.append(_Bin())
        return self.bins[-1]

    def place_group(self, group: Sequence[HostView]) -> bool:
        """Next-fit a whole job; False (and nothing placed) if it fits no wave at all."""
        if not self.fits(_Bin(), group):
            return False
        b = self.bins[-1] if self.bins else self._open()
        if not self.fits(b, group):
            b = self._open()
        for h in group:
            b.add(h)
        return True

    def place_one(self, h: HostView, start: int = 0) -> None:
        """First-fit one host into the waves from ``start`` on, opening one if none has room."""
        while self._first_open < len(self.bins) and self.bins[self._first_open].taken >= self.cap:
            self._first_open += 1
        for b in self.bins[max(start, self._first_open) :]:
            if self.fits(b, (h,)):
                b.add(h)
                return
        b = self._open()
        if not self.fits(b, (h,)):
            raise _NoRoom(
                f"rack {h.rack} / zone {h.zone} has no room left under budget.per_rack/per_zone"
            )
        b.add(h)


# ------------------------------------------------------------- estimation
@dataclass
class _Estimate:
    waves: list[Wave]
    hours: float = 0.0
    gpu_out: float = 0.0
    gpu_lost: float = 0.0


def _estimate(
    snap: ClusterSnapshot, bins: list[list[HostView]], maint: Mapping[str, float], wait: float
) -> _Estimate:
    """Replay the waves of one cluster in sequence on the snapshot's jobs."""
    est = _Estimate([])
    order = {h.name: i for i, h in enumerate(snap.hosts)}
    t = snap.now
    seen: set[int] = set()
    for index, hosts in enumerate(bins):
        release: dict[int, float] = {}
        interrupted: list[int] = []
        jids = {h.job_id for h in hosts if h.job_id is not None and h.job_id in snap.jobs}
        for jid in sorted(jids):
            if jid in seen:
                continue  # split job: already evicted by an earlier wave
            seen.add(jid)
            job = snap.jobs[jid].at(t)
            if job is None:
                continue
            step = drain_step(job, t, t + wait)
            release[jid] = step.at_hours
            if step.action != "wait_end":
                interrupted.append(jid)
                last = (job.at(step.at_hours) or job).last_checkpoint_hours
                est.gpu_lost += max(0.0, step.at_hours - last) * job.size * GPUS_PER_HOST
        drain_end = max(release.values(), default=t)
        end = drain_end + max(maint[h.name] for h in hosts)
        est.gpu_out += GPUS_PER_HOST * sum(
            end - (t if h.job_id is None else release.get(h.job_id, t)) for h in hosts
        )
        est.waves.append(
            Wave(
                index=index,
                cluster=snap.name,
                hosts=sorted((h.name for h in hosts), key=order.__getitem__),
                jobs_affected=sorted(release),
                jobs_interrupted=interrupted,
                est_start_hours=round(t - snap.now, 3),
                drain_hours=round(drain_end - t, 3),
                est_hours=round(end - t, 3),
            )
        )
        t = end
    est.hours = t - snap.now
    return est


# ---------------------------------------------------------------- planning
def _maintenance_hours(spec: OperationSpec, hosts: Sequence[HostView]) -> dict[str, float]:
    if spec.kind == "reboot":
        return {h.name: dyn.REBOOT_HOURS + dyn.VERIFY_HOURS for h in hosts}
    if spec.kind == "drain-for-repair":
        return {h.name: 0.0 for h in hosts}
    cache: dict[tuple[str, ...], float] = {}
    out = {}
    for h in hosts:
        comps = tuple(c for c, v in spec.targets.items() if h.versions.get(c) != v)
        if comps not in cache:
            cache[comps] = dyn.maintenance_hours(dyn.order_updates(list(comps)))
        out[h.name] = cache[comps]
    return out


def _pct(hosts: int, total: int) -> str:
    return f"{math.ceil(hosts * 100 / total)}%"


def _classify(
    spec: OperationSpec, scoped: Sequence[HostView]
) -> tuple[list[str], list[str], list[HostView]]:
    """Split the scope into already done, deferred (out for repair) and still to change."""
    done: list[str] = []
    deferred: list[str] = []
    todo: list[HostView] = []
    for h in scoped:
        repairing = h.state in _REPAIR_STATES or (
            h.state != IN_SERVICE and h.owner == REPAIR_RETURN_OWNER
        )
        if spec.kind == "drain-for-repair":
            (done.append(h.name) if h.state in _REPAIR_STATES else todo.append(h))
        elif spec.kind != "reboot" and all(h.versions.get(c) == v for c, v in spec.targets.items()):
            done.append(h.name)
        elif repairing:
            deferred.append(h.name)
        else:
            todo.append(h)
    return done, deferred, todo


@dataclass
class _ClusterResult:
    summary: ClusterPlan
    est: _Estimate
    done: list[str]
    deferred: list[str]
    split_jobs: int = 0


def _one_wave(
    spec: OperationSpec,
    snap: ClusterSnapshot,
    todo: list[HostView],
    down: list[HostView],
    budget: CapacityBudget,
    maint: Mapping[str, float],
) -> tuple[int, str | None]:
    """Check that the whole scope of a cluster may go at once; (limit in force, refusal)."""
    names = {h.name for h in todo}
    need = len(todo) + sum(1 for h in down if h.name not in names)
    pct = _pct(need, snap.hosts_total)
    if spec.consistency != "cluster":  # drain-for-repair: hosts stay out until repaired
        limit = budget.limit(snap.hosts_total)
        if need <= limit and _Packer(limit, budget, down).fits(_Bin(), todo):
            return limit, None
        return limit, (
            f"{snap.name}: drain-for-repair keeps {need} hosts out of service until repaired; "
            f'budget allows {limit}: raise budget.max_unavailable to "{pct}" '
            "(and per_rack/per_zone if set)"
        )
    window = spec.window
    limit = window.limit(snap.hosts_total) if window else 0
    hours = _estimate(snap, [todo], maint, spec.drain.max_wait_hours).hours
    ask = f'add window: {{max_unavailable: "{pct}", duration: "{math.ceil(hours)}h"}}'
    if need > limit:
        return limit, (
            f"{snap.name}: consistency: cluster needs a window budget of {pct} ({need} hosts) "
            f"for ~{hours:.1f} h; {ask}"
        )
    if window is not None and hours > window.duration_hours:
        return limit, (
            f"{snap.name}: consistency: cluster needs ~{hours:.1f} h but window.duration is "
            f"{window.duration_hours:g} h; {ask}"
        )
    return limit, None


def _pack(
    snap: ClusterSnapshot, todo: list[HostView], packer: _Packer
) -> tuple[list[list[HostView]], int]:
    """Jobs whole (by end time, next-fit), split ones host by host, idle hosts into the gaps."""
    by_job: dict[int, list[HostView]] = {}
    idle: list[HostView] = []
    for h in todo:
        if h.job_id is not None and h.job_id in snap.jobs:
            by_job.setdefault(h.job_id, []).append(h)
        else:
            idle.append(h)
    split = 0
    for jid in sorted(by_job, key=lambda j: (snap.jobs[j].end_hours, j)):
        if not packer.place_group(by_job[jid]):
            split += 1
            start = max(0, len(packer.bins) - 1)
            for h in by_job[jid]:
                packer.place_one(h, start)
    for h in idle:
        packer.place_one(h)
    return [b.hosts for b in packer.bins], split


def _plan_cluster(
    spec: OperationSpec, snap: ClusterSnapshot, scoped: list[HostView]
) -> _ClusterResult:
    done, deferred, todo = _classify(spec, scoped)
    down = [h for h in snap.hosts if h.state != IN_SERVICE]
    budget = spec.budget
    if spec.window is not None:
        budget = budget.model_copy(update={"max_unavailable": spec.window.max_unavailable})
    limit = budget.limit(snap.hosts_total)
    cap = limit - len(down)
    maint = _maintenance_hours(spec, todo)
    refused: str | None = None
    bins: list[list[HostView]] = []
    split = 0
    if todo and (spec.consistency == "cluster" or spec.kind == "drain-for-repair"):
        limit, refused = _one_wave(spec, snap, todo, down, budget, maint)
        bins, cap = [todo], len(todo)
    elif todo and cap <= 0:
        refused = (
            f"{snap.name}: {len(down)} hosts already out of service fill the budget of "
            f"{limit}; raise budget.max_unavailable above {len(down)} or wait for repairs"
        )
    elif todo:
        try:
            bins, split = _pack(snap, todo, _Packer(cap, budget, down))
        except _NoRoom as err:
            refused = f"{snap.name}: {err}"
    wait = spec.drain.max_wait_hours
    est = _Estimate([]) if refused else _estimate(snap, bins, maint, wait)
    summary = ClusterPlan(
        cluster=snap.name,
        hosts_total=snap.hosts_total,
        hosts_in_scope=len(scoped),
        out_of_service=len(down),
        budget_limit=limit,
        wave_cap=max(0, cap),
        hosts_to_change=len(todo) + len(deferred),
        already_done=len(done),
        deferred=len(deferred),
        waves=len(est.waves),
        est_hours=round(est.hours, 3),
        refused=refused,
    )
    return _ClusterResult(summary, est, done, deferred, split)


def plan_operation(
    spec: OperationSpec,
    clusters: Mapping[str, ClusterSnapshot],
    holders: Iterable[Holder] = (),
) -> OperationPlan:
    """Plan ``spec`` over the snapshots of the clusters its scope names.

    Raises ValueError naming ``scope`` when the scope (or one of its zone/rack/host patterns)
    matches no host. A plan that cannot be carried out is returned with ``refused`` set and no
    waves, so automation gets the reason and what it would take.
    """
    op_id = operation_id(spec)
    scope = _ScopeFilter(spec.scope)
    scoped = {name: scope.hosts(snap) for name, snap in sorted(clusters.items())}
    scope.check(clusters)
    if not any(scoped.values()):
        raise ValueError(f"scope: matches no host in {', '.join(sorted(clusters)) or 'no cluster'}")
    results = [_plan_cluster(spec, clusters[n], hosts) for n, hosts in scoped.items() if hosts]
    refusals = [r.summary.refused for r in results if r.summary.refused]
    refused = None
    if refusals:
        refused = refusals[0] + (
            f" (and {len(refusals) - 1} more clusters)" if refusals[1:] else ""
        )
    warnings = [
        f"{r.summary.cluster}: {r.split_jobs} running jobs exceed a wave of {r.summary.wave_cap} "
        "hosts and are split: each is drained (ended or evicted) at its first wave and "
        "restarts on one version"
        for r in results
        if r.split_jobs
    ]
    hours = max((r.est.hours for r in results), default=0.0)
    if spec.window is not None and not refused and hours > spec.window.duration_hours:
        warnings.append(
            f"estimated ~{hours:.1f} h exceeds window.duration {spec.window.duration_hours:g} h"
        )
    names = {r.summary.cluster for r in results}
    conflicts = sorted(
        f"{h.cluster}: serialised after {h.holder_id} which holds {h.hosts} hosts"
        + (f" ({h.scope})" if h.scope else "")
        for h in holders
        if h.cluster in names and h.holder_id != op_id and h.hosts > 0
    )
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
        conflicts=conflicts,
        warnings=warnings,
        refused=refused,
    )


def holders_in(snapshots: Iterable[ClusterSnapshot]) -> list[Holder]:
    """Campaigns holding hosts right now, read from host owners (until the arbiter answers)."""
    counts: Counter[tuple[str, str]] = Counter(
        (s.name, h.owner) for s in snapshots for h in s.hosts if h.owner not in _NOT_HOLDERS
    )
    return [Holder(owner, cluster, n) for (cluster, owner), n in sorted(counts.items())]
