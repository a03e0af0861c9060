"""The visit cycle: which hosts a train has still to visit, and when a cycle is complete.

``views.is_due`` says whether one host is due; ``cycle_counts`` sorts a cluster's hosts into
visited, due, in flight, quarantined and in repair for one owner, and ``cycle_complete`` is the
one test of a finished cycle. The live train and the simulator both count through here.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter

from orchestrator.execution.messages import CycleCounts
from orchestrator.fleet.backend import ClusterBackend
from orchestrator.models import HostState

_KIND = attrgetter("state", "owner", "due")


def cycle_counts(b: ClusterBackend, cycle_started: float, owner: str) -> CycleCounts:
    """Visit-cycle figures: visited = returned by a train since the cycle began."""
    # Hosts alike in (state, owner, due) count alike: they are tallied at C speed over the
    # snapshot's views (``due`` is ``is_due`` for this cycle), each kind classified once, and
    # in plain ints (a pydantic model's attribute writes cost ~10x): the simulator counts
    # meta-24k's 3,072 hosts at every plan.
    quarantined = in_repair = in_flight = due = visited = out = 0
    snap = b.snapshot(cycle_started)
    q_state, r_state, in_service = HostState.QUARANTINED, HostState.IN_REPAIR, HostState.IN_SERVICE
    for (state, holder, is_due), n in Counter(map(_KIND, snap.hosts)).items():
        if state == q_state:
            quarantined += n
        elif state == r_state:
            in_repair += n
        elif holder == owner:
            in_flight += n
        elif state != in_service:
            due += n  # held by another campaign: still to visit
        elif is_due:
            due += n
        else:
            visited += n
        if state != in_service:
            out += n
    return CycleCounts(
        hosts_total=len(snap.hosts),
        fleet_hours=b.now,
        quarantined=quarantined,
        in_repair=in_repair,
        in_flight=in_flight,
        due=due,
        visited=visited,
        out_of_service=out,
    )


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
    counts: CycleCounts, cycle_started_hours: float, target_hours: float | None = None
) -> tuple[float | None, bool | None]:
    """The fleet hour the current cycle should end at this pace, and whether that meets
    ``target_hours`` (the spec's ``cycle_target``; None: no target, no verdict).

    The pace is the hosts settled so far (visited, quarantined, in repair) over the hours since
    the cycle began, extrapolated to every host. Nothing settled yet means no projection (None);
    a finished cycle projects its own end.
    """
    done = counts.visited + counts.quarantined + counts.in_repair
    elapsed = counts.fleet_hours - cycle_started_hours
    if counts.hosts_total <= 0 or done <= 0 or elapsed <= 0:
        return None, None
    end = cycle_started_hours + elapsed * max(counts.hosts_total, done) / done
    if target_hours is None:
        return end, None
    return end, end - cycle_started_hours <= target_hours
