"""The simulator's two limits: ``--budget`` (maintenance) and ``--max-unavailable`` (the floor).

A simulated campaign is judged against the hosts planned work may hold (``budget_hosts``, the
issue's lower bound divides the work by it); the floor above it leaves a failure buffer, so
failures and repairs landing on the cluster do not eat the maintenance budget, as Meta's
OpsPlanner keeps planned-maintenance and failure buffers apart. Left out, the floor is the budget
plus ``DEFAULT_BUFFER_POINTS`` percentage points of the cluster.
"""

from __future__ import annotations

import math

from orchestrator.contracts.models import CapacityBudget

#: Failure buffer above the maintenance budget when ``--max-unavailable`` is left out: on
#: meta-24k, failures, repairs and quarantines hold ~30 hosts on average (about 1% of 3,072),
#: ~60 at their peak; two points (61 hosts) leave the 3% budget whole nearly all the time.
DEFAULT_BUFFER_POINTS = 2


def sim_budget(
    budget: str | int, max_unavailable: str | int | None, hosts_total: int
) -> CapacityBudget:
    """``CapacityBudget(max_unavailable=floor, maintenance=budget)``; ValueError names the field.

    The default floor is ``budget`` + 2 points: ``"3%"`` gives ``"5%"``; a host count gives the
    count plus 2% of the cluster's hosts.
    """
    maint = CapacityBudget(max_unavailable=budget).max_unavailable  # validated, normalised
    if max_unavailable is None:
        if isinstance(maint, str):
            floor: int | str = f"{min(100.0, float(maint[:-1]) + DEFAULT_BUFFER_POINTS):g}%"
        else:
            floor = maint + math.floor(hosts_total * DEFAULT_BUFFER_POINTS / 100)
    else:
        floor = max_unavailable
    floor_limit = CapacityBudget(max_unavailable=floor).limit(hosts_total)
    if CapacityBudget(max_unavailable=maint).limit(hosts_total) > floor_limit:
        raise ValueError(
            f"max_unavailable: the floor ({floor}) must be at least the maintenance budget "
            f"({maint})"
        )
    return CapacityBudget(max_unavailable=floor, maintenance=maint)
