"""The visit cycle: which hosts a train has still to visit, and when a cycle is complete.

``views.is_due`` says whether one host is due; ``cycle_counts`` sorts a cluster's hosts into
visited, due, in flight, quarantined and in repair for one owner, and ``cycle_complete`` is the
one test of a finished cycle. The live train and the simulator both count through here.
``settled`` is the one count of hosts the cycle is done with (the pace, the ETA), and
``visited_this_cycle`` the figure pages show: it never drops within a cycle (a visited host
that goes to repair stays visited; ``train.status.visit_figures`` counts it once).
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from itertools import compress
from operator import attrgetter, is_not

from orchestrator.contracts.backend import ClusterBackend
from orchestrator.contracts.constants import REPAIR_STATES
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.models import HostState

_STATE, _OWNER, _DUE = attrgetter("state"), attrgetter("owner"), attrgetter("due")
_LAST = attrgetter("last_visit")
_KNOWN = partial(is_not, None)
#: How often (in fleet time) a train plans again when nothing wakes it: one value for the live
#: train's poll and the simulator's, so the simulator plans when the live train would.
POLL_FLEET_HOURS = 1.0


def next_look_hours(now: float, retry_at_hours: float | None) -> float:
    """The fleet hour a train plans again if nothing wakes it first: its poll, or the
    planner's retry instant (``retry_at_hours``) when that is ahead and comes sooner."""
    target = now + POLL_FLEET_HOURS
    if retry_at_hours is not None and now < retry_at_hours < target:
        return retry_at_hours
    return target


def cycle_counts(b: ClusterBackend, cycle_started: float, owner: str) -> CycleCounts:
    """Visit-cycle figures: visited = returned by a train since the cycle began.

    Each host counts once, in the first of: quarantined, in repair, in flight (``owner``
    holds it), due (out of service for another owner, or in service and ``is_due``: the
    snapshot's ``due``), visited (in service, not due). Beside that partition,
    ``visited_this_cycle`` counts every host visited since the cycle began whatever it is now,
    and ``visited_now_out`` those of them quarantined or in repair.
    """
    # The simulator counts meta-24k's 3,072 hosts at every plan: the tallies over the
    # snapshot's views run at C speed (map, compress, Counter), only the owner's few hosts
    # one by one, and in plain ints (a pydantic model's attribute writes cost ~10x).
    snap = b.snapshot(cycle_started)
    hosts = snap.hosts
    in_service = HostState.IN_SERVICE
    states = Counter(map(_STATE, hosts))
    quarantined, in_repair = states[HostState.QUARANTINED], states[HostState.IN_REPAIR]
    mine = [
        h
        for h in compress(hosts, map(owner.__eq__, map(_OWNER, hosts)))
        if h.state not in REPAIR_STATES
    ]
    in_flight = len(mine)
    # In service and not due, less the owner's own (in flight): visited.
    served = states[in_service] - sum(1 for h in mine if h.state == in_service)
    due_served = sum(compress(map(_DUE, hosts), map(in_service.__eq__, map(_STATE, hosts))))
    due_served -= sum(1 for h in mine if h.state == in_service and h.due)
    visited = served - due_served
    # Everything else neither quarantined, in repair nor in flight is still to visit.
    due = len(hosts) - quarantined - in_repair - in_flight - visited
    out = len(hosts) - states[in_service]
    # Visited since the cycle began whatever the state now (``views.visited_since``): a
    # visit's fleet hour only moves on, so this never drops within a cycle.
    since = float(cycle_started).__le__
    reached = sum(map(since, filter(_KNOWN, map(_LAST, hosts))))
    out_hosts = compress(hosts, map(REPAIR_STATES.__contains__, map(_STATE, hosts)))
    reached_out = sum(map(since, filter(_KNOWN, map(_LAST, out_hosts))))
    return CycleCounts(
        hosts_total=len(snap.hosts),
        fleet_hours=b.now,
        quarantined=quarantined,
        in_repair=in_repair,
        in_flight=in_flight,
        due=due,
        visited=visited,
        visited_this_cycle=reached,
        visited_now_out=reached_out,
        out_of_service=out,
    )


def settled(counts: CycleCounts) -> int:
    """Hosts the cycle is done with, each once: back in service after a visit, quarantined or
    in repair (a visited host now in repair counts once, as in repair). The pace, the ETA and
    "every host visited" read this one sum."""
    return counts.visited + counts.quarantined + counts.in_repair


def visited_this_cycle(counts: CycleCounts) -> int:
    """Hosts visited since the cycle began, whatever they are now: never drops within a
    cycle. (A state carried from before the figure existed has only ``visited``.)"""
    return max(counts.visited_this_cycle, counts.visited)


def cycle_complete(counts: CycleCounts, domains_in_flight: int) -> bool:
    """Every host visited, quarantined or with repair, nothing held, no domain still running.

    A host back from repair waiting for its updates is due, so a cycle never completes while one
    would return to service without them.
    """
    return (
        counts.hosts_total > 0
        and counts.due == 0
        and counts.in_flight == 0
        and domains_in_flight == 0
    )


def project_cycle_end(
    counts: CycleCounts,
    cycle_started_hours: float,
    target_hours: float | None = None,
    resting: bool = False,
) -> tuple[float | None, bool | None]:
    """The fleet hour the current cycle should end at this pace, and whether that meets
    ``target_hours`` (the spec's ``cycle_target``; None: no target, no verdict).

    A resting train has no cycle running: no projection, and on track (with a target), since
    every host is on its targets and none waits for a visit however long the rest lasts.

    The pace is the hosts settled so far (visited, quarantined, in repair) over the hours since
    the cycle began, extrapolated to every host. Nothing settled yet means no projection (None);
    a finished cycle projects its own end.
    """
    if resting:
        return None, None if target_hours is None else True
    done = settled(counts)
    elapsed = counts.fleet_hours - cycle_started_hours
    if counts.hosts_total <= 0 or done <= 0 or elapsed <= 0:
        return None, None
    end = cycle_started_hours + elapsed * max(counts.hosts_total, done) / done
    if target_hours is None:
        return end, None
    return end, end - cycle_started_hours <= target_hours
