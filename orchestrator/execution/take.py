"""Taking the next hosts for a train: ask the shared planner, cordon what it chose, atomically.

Run inside one backend transaction, so every cordon re-checks the budget against the cluster as
it is now (a failure that landed since the snapshot is respected). Hosts the owner holds but its
caller does not know about (a retried activity that had committed before its worker died) are
handed back to the caller first, never forgotten.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from orchestrator.constants import HELD_STATES, UNTOUCHED_STATES
from orchestrator.execution.cycle import cycle_counts
from orchestrator.execution.messages import CycleCounts
from orchestrator.fleet.backend import ClusterBackend
from orchestrator.models import CapacityBudget
from orchestrator.planning import train_plan


@dataclass
class Taken:
    hosts: list[str] = field(default_factory=list)
    waiting: str = ""
    retry_at_hours: float | None = None
    limit: int = 0
    counts: CycleCounts = field(default_factory=CycleCounts)
    asked: bool = False  # whether the planner was asked (there was room for more)


def take_domain(
    b: ClusterBackend,
    owner: str,
    budget: CapacityBudget,
    cycle_started_hours: float,
    max_held: int,
    max_wait_hours: float,
    policy: str,
    known: Collection[str] = (),
) -> Taken:
    """Up to ``max_held`` hosts held by ``owner`` in all: plan the rest and cordon them."""
    names = b.host_names()
    limit = max(1, budget.limit(len(names)))  # as the arbiter's grant (cluster_train)
    out = Taken(limit=limit)
    orphans = []
    held = 0
    for n in names:
        h = b.host(n)
        if h.owner == owner and h.state in HELD_STATES:
            held += 1
            if h.state in UNTOUCHED_STATES and n not in known:
                orphans.append(n)
    slots = max_held - held
    if slots > 0:
        out.asked = True
        snap = b.snapshot(cycle_started_hours)
        plan = train_plan.choose_domain(
            snap.hosts,
            snap.jobs,
            snap.now,
            train_plan.BudgetView(limit, budget.per_rack, budget.per_zone),
            slots,
            max_wait_hours,
            policy,
        )
        for name in plan.hosts:
            if b.cordon(name, owner, owner, limit, budget.per_rack, budget.per_zone):
                out.hosts.append(name)
        out.waiting, out.retry_at_hours = plan.waiting, plan.retry_at_hours
    out.hosts = orphans + out.hosts
    out.counts = cycle_counts(b, cycle_started_hours, owner)
    return out
