"""A campaign's stages resolved against the fleet: which clusters each stage covers, how many
hosts, and the gates in force. Pure: names and sizes in, a plan out.

A cluster that an earlier stage covered whole is left out of later stages (``rest: "*"`` after
``first-cluster: [c00]`` means the other clusters); a stage whose clusters all were is kept,
with nothing to do, so the plan still shows it. A stage naming no cluster of the scope is an
error naming the stage's field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from orchestrator.contracts.campaign_spec import CampaignSpec, Gates, resolve_count
from orchestrator.contracts.campaign_types import StagePlanModel


@dataclass(frozen=True)
class StagePlan:
    name: str
    clusters: tuple[str, ...]
    hosts_per_cluster: dict[str, int]
    """Hosts the stage changes in each cluster (its ``hosts`` limit, or the cluster's size)."""
    partial: bool
    """Only some hosts of each cluster (a canary): the change is not recorded cluster-wide."""
    bake_hours: float
    parallel: int
    gates: Gates

    @property
    def hosts_total(self) -> int:
        return sum(self.hosts_per_cluster.values())


def _matching(patterns: list[str], names: list[str]) -> list[str]:
    return [n for n in names if any(fnmatchcase(n, p) for p in patterns)]


def plan_campaign(spec: CampaignSpec, cluster_sizes: Mapping[str, int]) -> list[StagePlan]:
    """Resolve every stage; ValueError naming ``scope.cluster``, ``stages.N.clusters`` or
    ``stages.N.hosts`` (a host count larger than a cluster it covers)."""
    names = sorted(cluster_sizes)
    scope = [n for n in names if fnmatchcase(n, spec.scope.cluster)]
    if not scope:
        known = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise ValueError(f"scope.cluster: {spec.scope.cluster!r} matches no cluster ({known})")
    covered: set[str] = set()
    plans = []
    for i, stage in enumerate(spec.stages):
        matched = _matching(stage.clusters, scope)
        if not matched:
            raise ValueError(
                f"stages.{i}.clusters: {stage.clusters} match no cluster of the scope "
                f"({', '.join(scope[:5])})"
            )
        todo = [c for c in matched if c not in covered]
        sizes = {}
        for c in todo:
            n = cluster_sizes[c]
            # One budget rule: a count against a percentage compares at the cluster's size.
            spec.train.budget.check_maintenance(n, "train.budget.max_unavailable")
            if isinstance(stage.hosts, int) and stage.hosts > n:  # refused, never clamped
                raise ValueError(
                    f"stages.{i}.hosts: {stage.hosts} hosts, but cluster {c} has {n}; a "
                    "stage takes at most every host of a cluster (leave hosts out for all)"
                )
            sizes[c] = n if stage.hosts is None else max(1, min(n, resolve_count(stage.hosts, n)))
        partial = stage.hosts is not None and any(sizes[c] < cluster_sizes[c] for c in todo)
        if not partial:
            covered.update(todo)
        gates = (stage.gates or Gates()).over(spec.gates)
        plans.append(
            StagePlan(
                stage.name, tuple(todo), sizes, partial, stage.bake_hours, stage.parallel, gates
            )
        )
    return plans


def failure_limit(gates: Gates, hosts_total: int) -> int | None:
    """The most failures a stage of ``hosts_total`` hosts may have, if the gate fixes one."""
    if gates.max_failures is None:
        return None
    return resolve_count(gates.max_failures, hosts_total)


def spread_over_racks(ranked: list[tuple[str, str]], count: int) -> list[str]:
    """The first ``count`` of ``ranked`` (host, rack) hosts, taking each rack's best in turn
    before any rack's second: a canary's hosts span racks (a rack switch or a per-rack budget
    cannot make the whole canary one failure, or one host at a time), in the ranked order."""
    order = {n: i for i, (n, _) in enumerate(ranked)}
    by_rack: dict[str, list[str]] = {}
    for name, rack in ranked:
        by_rack.setdefault(rack, []).append(name)
    chosen: list[str] = []
    depth = 0
    while len(chosen) < count and any(len(v) > depth for v in by_rack.values()):
        layer = [hosts[depth] for hosts in by_rack.values() if len(hosts) > depth]
        chosen += sorted(layer, key=order.__getitem__)[: count - len(chosen)]
        depth += 1
    return chosen


def stage_model(p: StagePlan) -> StagePlanModel:
    """The stage as the campaign workflow carries it (its base rate: the model's default)."""
    return StagePlanModel(
        name=p.name,
        clusters=list(p.clusters),
        hosts_per_cluster=p.hosts_per_cluster,
        partial=p.partial,
        bake_hours=p.bake_hours,
        parallel=p.parallel,
        gates=p.gates,
    )
