"""How a cluster's operation counts its waves between two of them: pure bookkeeping.

Each plan of what is left (``ClusterPlanView``) updates the progress: the fleet hour, the
deferred hosts (those out for repair, and those it lost to repair mid-wave, for good) and the
waves in all. The first plan sets ``waves_total``; a later plan that counts otherwise re-plans
it, and every re-plan is recorded in ``replans`` with its reason (the arbiter's grant changed,
a refusing job's hosts went to a later wave, hosts failed or went to repair, room ran out, more
or fewer hosts to change, jobs started or ended), the latest also as ``plan_note``, so the
count a user watches changes only with a reason shown beside it. Pure and deterministic: it
runs inside the ``ClusterOperation`` workflow.

``follow_planned`` is how the run keeps the plan's waves: given the waves planned when the
cluster's operation began (those not yet run) and the hosts still to change now, it says which
hosts each remaining wave takes. A planned wave loses the hosts no longer to change (failed,
in repair, changed meanwhile); hosts to change that no remaining wave holds (a refusing job's
hosts handed back by a wave already run, hosts back from repair) join the last wave when it has
room, else one more wave, as the plan's estimate places a refusing job's hosts; so do a wave's
hosts beyond the room a wave has now (outages, a smaller grant). Whenever that changes the
count of waves, it says why, and the run records it as a re-plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.contracts.ops_types import ClusterPlanView, ClusterProgress
from orchestrator.contracts.ui_text import plural

#: Re-plans a cluster's progress keeps (the latest), so its status stays small.
MAX_REPLANS = 20


@dataclass(frozen=True)
class Followed:
    """The remaining planned waves as they stand now: each wave's hosts and its planned index
    (``len(planned)`` for a wave added after the last), and why the count changed, if it did."""

    waves: list[list[str]] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    why: str = ""
    #: the waves are a fresh plan's, in place of the planned ones
    fresh: bool = False


def follow_planned(planned: Sequence[Sequence[str]], pending: Sequence[str], cap: int) -> Followed:
    """The waves still to run: the ``planned`` ones (not yet run) restricted to the hosts in
    ``pending`` (still to change now, in the order the planner lists them), at most ``cap``
    hosts each; the pending hosts none of them holds, and a wave's hosts beyond ``cap``, join
    the last wave when it has room, else one more (or more)."""
    cap = max(1, cap)
    todo, covered = set(pending), set[str]()
    out = Followed()
    gone, over = 0, list[str]()
    for i, hosts in enumerate(planned):
        covered.update(hosts)
        keep = [h for h in hosts if h in todo]
        gone += not keep
        if keep:
            out.waves.append(keep[:cap])
            out.index.append(i)
            over += keep[cap:]
    outside = [h for h in pending if h not in covered]
    left = over + outside
    if left and out.waves and len(out.waves[-1]) + len(left) <= cap:
        out.waves[-1] = out.waves[-1] + left
    else:
        for start in range(0, len(left), cap):
            out.waves.append(left[start : start + cap])
            out.index.append(len(planned))
    why = []
    if gone:
        why.append(f"{plural(gone, 'planned wave')} had no host left to change")
    if over:
        moved = plural(len(over), "host")
        why.append(f"room ran out: room for {plural(cap, 'host')} a wave, {moved} moved on")
    if outside:
        why.append(f"{plural(len(outside), 'host')} to change outside the planned waves")
    return Followed(out.waves, out.index, "; ".join(why))


def follow_plan(
    p: ClusterProgress, view: ClusterPlanView, planned_with: int | None, cluster: str
) -> int | None:
    """Fold a plan of what is left of ``cluster`` into its progress; the grant ``waves_total``
    is now planned with (``replan``)."""
    p.fleet_hours = view.fleet_hours
    p.deferred_hosts = sorted({*view.deferred_hosts, *p.lost_to_repair})
    p.hosts_deferred = len(p.deferred_hosts) - view.returning
    # Hosts back from repair with nothing else left still make one more wave.
    total = p.waves_done + view.waves_left + (1 if view.returning and not view.waves_left else 0)
    room, limit = view.waiting_for_room, view.limit
    grant = replan(p, total, planned_with, cluster, room, limit, view.replan)
    p.plan_basis = _basis(p)
    return grant


def _basis(p: ClusterProgress) -> dict[str, int]:
    """What a later re-plan compares against to say why the count changed."""
    return {
        "requeued": p.hosts_requeued,
        "failed": p.hosts_quarantined + len(p.lost_to_repair) + p.failures,
        "deferred": p.hosts_deferred,
    }


def replan(
    p: ClusterProgress,
    total: int,
    planned_with: int | None,
    cluster: str,
    room: str | None = None,
    limit: int | None = None,
    planned: str = "",
) -> int | None:
    """Set ``p.waves_total`` from a plan of ``total`` waves at the grant ``p.granted_hosts``,
    recording why when it changes; the grant it is now planned with (``planned_with`` was the
    last, None: the spec's budget of ``limit`` hosts). ``room``: why the cluster waits for room,
    if it does; ``planned``: why the planned waves changed (``follow_planned``), if they did."""
    grant = p.granted_hosts
    if p.waves_total == 0 or total == p.waves_total:
        p.waves_total = max(p.waves_total, total)
        return grant
    before = planned_with if planned_with is not None else limit
    why = _why(p, total, before, cluster, room, planned)
    p.plan_note = f"re-planned from {p.waves_total} to {total} waves: {why}"
    p.replans = [*p.replans, p.plan_note][-MAX_REPLANS:]
    p.waves_total = total
    return grant


def _why(
    p: ClusterProgress,
    total: int,
    planned_with: int | None,
    cluster: str,
    room: str | None,
    planned: str = "",
) -> str:
    """The reason a plan of ``total`` waves differs from ``p.waves_total``."""
    basis = p.plan_basis
    failed = p.hosts_quarantined + len(p.lost_to_repair) + p.failures
    if p.granted_hosts is not None and p.granted_hosts != planned_with:
        before = "the budget" if planned_with is None else f"{planned_with} hosts"
        return (
            f"{cluster}'s capacity arbiter grants {p.granted_hosts} hosts a wave "
            f"(planned with {before})"
        )
    if p.hosts_requeued > basis.get("requeued", 0):
        moved = p.hosts_requeued - basis.get("requeued", 0)
        return f"a job refused to be drained: its {moved} hosts went to a later wave"
    if failed > basis.get("failed", 0):
        return "hosts failed or went to repair"
    if room:
        return f"room ran out: {room}"
    if planned:
        return planned
    if p.hosts_deferred < basis.get("deferred", 0):
        return "more hosts to change than planned (back from repair, or newly in scope)"
    if total > p.waves_total:
        return "jobs started or ended since the last plan, so the rest was cut again"
    return "jobs ended or the waves took more hosts than planned"
