"""Pure planning of rack-switch visits: which rack to take whole, and whether a rack fits.

A rack switch update takes every host below the switch off the network (its blast radius in the
topology), so a train with a ``switch_firmware`` target visits racks, not hosts: the rack is the
maintenance domain, drained together, its switch updated, its hosts given every host update due
and verified. A rack visit may exceed ``per_rack`` (it is the rack) but never the budget: the
hosts it takes out must fit under the floor (hosts out for any reason) and the maintenance
budget (hosts held for planned work by every owner). A rack larger than the budget could never be
visited, so ``rack_fits_budget`` lets a spec refuse it up front. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.contracts.constants import NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.models import CapacityBudget, HostState
from orchestrator.contracts.views import HostView, JobView

IN_SERVICE = HostState.IN_SERVICE


@dataclass
class RackPlan:
    """The rack to take next (None: no rack switch is due), its hosts to cordon, or why not."""

    rack: str | None = None
    hosts: list[str] = field(default_factory=list)
    waiting: str = ""
    due_racks: int = 0


def rack_fits_budget(budget: CapacityBudget, hosts_total: int, rack_hosts: int) -> str:
    """'' if a whole rack fits the budget of a cluster of ``hosts_total``, else why not (naming
    the budget field that is too small)."""
    floor = budget.limit(hosts_total)
    planned = budget.maintenance_limit(hosts_total)
    if rack_hosts <= planned:
        return ""
    which, value, hosts = (
        ("budget.maintenance", budget.maintenance, planned)
        if planned < floor
        else ("budget.max_unavailable", budget.max_unavailable, floor)
    )
    return (
        f"{which}: a switch_firmware target updates rack switches, which takes a whole rack "
        f"({rack_hosts} hosts) out at once, but {which.split('.')[1]} {value} allows "
        f"{hosts} of {hosts_total} hosts; allow at least {rack_hosts} hosts or drop the "
        "switch_firmware target"
    )


def choose_rack(
    hosts: Sequence[HostView],
    jobs: Mapping[int, JobView],
    switches: Mapping[str, str],
    target: str,
    limit: int,
    maintenance: int | None,
    now: float,
    max_wait_hours: float,
) -> RackPlan:
    """The next rack whose switch is not on ``target`` and that fits the budget now.

    A rack qualifies when none of its hosts is held by another owner (an operation, another
    train's domain); hosts down for repair or quarantine cost nothing (they are out already).
    Among those that fit, the one that interrupts least comes first: fewest running jobs that
    will not end within ``max_wait_hours``, then fewest busy hosts, then by name.
    """
    plan = RackPlan()
    by_rack: dict[str, list[HostView]] = {}
    for h in hosts:
        by_rack.setdefault(h.rack, []).append(h)
    due = [r for r in sorted(by_rack) if switches.get(r, target) != target]
    plan.due_racks = len(due)
    if not due:
        return plan
    down = [h for h in hosts if h.state != IN_SERVICE]
    planned = sum(1 for h in down if h.owner not in NOT_MAINTENANCE_OWNERS)
    best: tuple[tuple[int, int, str], str, list[str]] | None = None
    blocked = too_big = 0
    for rack in due:
        take = _takeable(by_rack[rack])
        if take is None:
            blocked += 1
            continue
        if len(down) + len(take) > limit or (
            maintenance is not None and planned + len(take) > maintenance
        ):
            too_big += 1
            continue
        key = (*_interruption(take, jobs, now, max_wait_hours), rack)
        if best is None or key < best[0]:
            best = (key, rack, [h.name for h in take])
    if best is None:
        plan.waiting = (
            f"{len(due)} rack switches due: no whole rack fits the budget now"
            if too_big
            else f"{len(due)} rack switches due: their racks are held ({blocked})"
        )
        return plan
    plan.rack, plan.hosts = best[1], best[2]
    return plan


def _takeable(members: Sequence[HostView]) -> list[HostView] | None:
    """The rack's hosts a visit takes out (those in service), or None while it cannot be
    visited: a host held by someone (an operation, or our own visit in flight), or every host
    down for repair (its visit waits for one back)."""
    if any(h.state != IN_SERVICE and h.owner not in NOT_MAINTENANCE_OWNERS for h in members):
        return None
    take = [h for h in members if h.state == IN_SERVICE]
    return take or None


def _interruption(
    take: Sequence[HostView], jobs: Mapping[int, JobView], now: float, max_wait_hours: float
) -> tuple[int, int]:
    """What taking these hosts interrupts: running jobs that will not end within
    ``max_wait_hours``, then busy hosts."""
    long_jobs = {
        h.job_id
        for h in take
        if h.job_id is not None
        and h.job_id in jobs
        and jobs[h.job_id].end_hours - now > max_wait_hours
    }
    busy = sum(1 for h in take if h.job_id is not None)
    return len(long_jobs), busy
