"""What each stage of a campaign is expected to cost the jobs, planned as the run plans it.

A stage's driver/CUDA targets run as one bulk operation per cluster
(``requests.stage_operation_spec``, the spec the campaign starts): each is planned here by
``plan_operation`` on the cluster's snapshot, so its figures are the ones ``trainctl ops plan``
prints for that spec (jobs interrupted, GPU-hours lost, duration, as ranges: high at most twice
low plus two), in the fleet's own hours. A canary's hosts are chosen as the run chooses them
(in service, lacking a target, idle first, then by name, one rack at a time); a stage after it
finds the hosts earlier stages changed already on target.

A stage's operations run ``parallel`` clusters at a time (a cluster baking leaves its place to
the next), then the last bakes: the stage's duration; its jobs and GPU-hours are the clusters'
sum.

Lower-layer targets ride the cluster's train, whose cycle no planner estimates on today's jobs:
the stage then names the ``trainctl simulate`` command that runs such a cycle in virtual time,
rather than a figure nobody computed. Pure: a spec, its stages and snapshots in, estimates out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.campaign.requests import lower_targets, stage_operation_spec, upper_targets
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import ClusterStage
from orchestrator.contracts.constants import REPAIR_STATES
from orchestrator.contracts.models import HostState
from orchestrator.contracts.ops_spec import OperationSpec, operation_id
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.planning.campaign_plan import StagePlan, spread_over_racks, stage_model
from orchestrator.planning.ops_estimate import count_range
from orchestrator.planning.ops_plan import OperationPlan, holders_in, plan_operation


@dataclass(frozen=True)
class ClusterEstimate:
    """One cluster's bulk operation in a stage, as ``ops plan`` plans its spec."""

    cluster: str
    operation_id: str
    hosts_to_change: int
    waves: int
    jobs_interrupted_range: tuple[int, int]
    gpu_hours_lost_range: tuple[float, float]
    estimated_duration_range_hours: tuple[float, float]
    refused: str | None = None
    #: The hosts a partial stage (a canary) takes, as the run chooses them; None: every host.
    hosts: list[str] | None = None


@dataclass
class StageEstimate:
    """A stage's cost: ``runs_as`` ``operation``, ``train`` or ``train, then operation``; the
    ranges cover its operations (None when only a train runs), ``simulate`` the train's."""

    runs_as: str
    operations: list[ClusterEstimate] = field(default_factory=list)
    jobs_interrupted_range: tuple[int, int] | None = None
    gpu_hours_lost_range: tuple[float, float] | None = None
    estimated_duration_range_hours: tuple[float, float] | None = None
    simulate: str | None = None


def canary_hosts(snap: ClusterSnapshot, count: int, targets: Mapping[str, str]) -> list[str]:
    """A partial stage's hosts, as ``campaign_stage_hosts`` chooses them on the same fleet."""
    ranked = sorted(
        (
            all(h.versions.get(c) == v for c, v in targets.items()),
            h.job_id is not None,
            h.name,
            h.rack,
        )
        for h in snap.hosts
        if h.state == HostState.IN_SERVICE
    )
    return spread_over_racks([(n, rack) for _, _, n, rack in ranked], count)


def _on_targets(
    snap: ClusterSnapshot, hosts: set[str] | None, targets: Mapping[str, str]
) -> ClusterSnapshot:
    """``snap`` with ``hosts`` (None: every in-service host) on ``targets``: earlier stages'."""
    if hosts is not None and not hosts:
        return snap

    def changed(h: HostView) -> bool:
        return h.name in hosts if hosts is not None else h.state == HostState.IN_SERVICE

    views = tuple(
        dataclasses.replace(h, versions={**h.versions, **targets}) if changed(h) else h
        for h in snap.hosts
    )
    return dataclasses.replace(snap, hosts=views)


def simulate_command(spec: CampaignSpec, preset: str, clusters: Sequence[str]) -> str:
    """The ``trainctl simulate`` run of one cluster's cycle (the first of ``clusters``; none
    named: the preset's clusters) with the train the campaign starts."""
    t = spec.train
    parts = ["trainctl simulate", f"--preset {preset}"]
    if clusters:
        parts.append(f"--cluster {clusters[0]}")
    parts.append(f"--budget {t.budget.maintenance or t.budget.max_unavailable}")
    parts.append(f"--max-unavailable {t.budget.max_unavailable}")
    parts.append(f"--domain-size {t.domain_size}")
    if t.drain is not None:
        parts.append(f"--max-wait {round(t.drain.max_wait_hours * 60)}m")
    return " ".join(parts)


def estimate_stages(
    spec: CampaignSpec,
    plans: Sequence[StagePlan],
    snaps: Mapping[str, ClusterSnapshot],
    preset: str,
    preset_clusters: bool = True,
) -> list[StageEstimate]:
    """Every stage's estimate, in order, each on the fleet as the stages before it leave it.

    ``preset`` is the simulated fleet a train stage's ``simulate`` command runs on;
    ``preset_clusters`` whether its clusters are this fleet's (then the command names one)."""
    snaps = dict(snaps)
    upper, lower = upper_targets(spec.targets), lower_targets(spec.targets)
    runs_as = "train, then operation" if upper and lower else "operation" if upper else "train"
    out = []
    for p in plans:
        est = StageEstimate(runs_as)
        chosen: dict[str, list[str] | None] = {}
        for c in p.clusters:
            n = p.hosts_per_cluster[c]
            chosen[c] = canary_hosts(snaps[c], n, spec.targets) if p.partial else None
        if lower:
            est.simulate = simulate_command(spec, preset, p.clusters if preset_clusters else ())
        if upper:
            est.operations = [_operation(spec, p, c, chosen[c], snaps[c]) for c in p.clusters]
            _totals(est, p)
        for c, hosts in chosen.items():
            snaps[c] = _on_targets(snaps[c], None if hosts is None else set(hosts), spec.targets)
        out.append(est)
    return out


def stage_operation(
    spec: CampaignSpec, p: StagePlan, cluster: str, hosts: list[str] | None, snap: ClusterSnapshot
) -> OperationSpec:
    """The bulk operation the run starts for ``cluster`` in stage ``p`` (its chosen ``hosts``)."""
    in_scope = (
        len(hosts)
        if hosts is not None
        else sum(1 for h in snap.hosts if h.state not in REPAIR_STATES)
    )
    cs = ClusterStage(cluster=cluster, hosts=hosts, in_scope=in_scope)
    return stage_operation_spec(spec, stage_model(p), p.name, cs)


def _operation(
    spec: CampaignSpec, p: StagePlan, cluster: str, hosts: list[str] | None, snap: ClusterSnapshot
) -> ClusterEstimate:
    op = stage_operation(spec, p, cluster, hosts, snap)
    plan: OperationPlan | None = None
    try:
        plan = plan_operation(op, {cluster: snap}, holders_in([snap]))
    except ValueError as err:  # a scope naming no host: nothing to change there
        refused: str | None = str(err)
    else:
        refused = plan.refused
    return dataclasses.replace(_cluster_estimate(cluster, op, plan, refused), hosts=hosts)


def _cluster_estimate(
    cluster: str, op: OperationSpec, plan: OperationPlan | None, refused: str | None
) -> ClusterEstimate:
    if plan is None or refused:
        zero = (0.0, 0.0)
        return ClusterEstimate(cluster, operation_id(op), 0, 0, (0, 0), zero, zero, refused)
    jobs, lost, hours = (
        plan.jobs_interrupted_range,
        plan.gpu_hours_lost_range,
        plan.estimated_duration_range_hours,
    )
    return ClusterEstimate(
        cluster,
        plan.operation_id,
        plan.hosts_to_change,
        len(plan.waves),
        (jobs[0], jobs[1]),
        (lost[0], lost[1]),
        (hours[0], hours[1]),
    )


def _totals(est: StageEstimate, p: StagePlan) -> None:
    """A stage's ranges from its clusters': jobs and work lost add up (the jobs' midpoints,
    spread again as one range), the clusters run ``parallel`` at a time, each then bakes."""
    ok = [o for o in est.operations if o.refused is None]
    mid = sum((o.jobs_interrupted_range[0] + o.jobs_interrupted_range[1]) / 2 for o in ok)
    est.jobs_interrupted_range = count_range(0, mid) if ok else (0, 0)
    low_lost = round(sum(o.gpu_hours_lost_range[0] for o in ok), 1)
    high_lost = round(sum(o.gpu_hours_lost_range[1] for o in ok), 1)
    est.gpu_hours_lost_range = (low_lost, min(high_lost, 2 * low_lost + 2))
    bake = p.bake_hours if ok else 0.0  # a baking cluster leaves its slot to the next
    low = _makespan([o.estimated_duration_range_hours[0] for o in ok], p.parallel) + bake
    high = _makespan([o.estimated_duration_range_hours[1] for o in ok], p.parallel) + bake
    est.estimated_duration_range_hours = (round(low, 3), round(min(high, 2 * low + 2), 3))


def _makespan(hours: list[float], parallel: int) -> float:
    """How long ``hours`` of work take, ``parallel`` at a time, each started when one ends."""
    slots = [0.0] * max(1, min(parallel, len(hours)))
    for h in hours:
        i = slots.index(min(slots))
        slots[i] += h
    return max(slots, default=0.0)
