"""How a cluster's operation counts its waves between two of them: pure bookkeeping.

Each plan of what is left (``ClusterPlanView``) updates the progress: the fleet hour, the
deferred hosts (those out for repair, and those it lost to repair mid-wave, for good) and the
waves in all. The operation plans ``waves_total`` at the capacity arbiter's grant, and re-plans
it only when that grant changes (or more is left than planned), saying why in ``plan_note``, so
the count a user watches does not wobble wave after wave. Pure and deterministic: it runs inside
the ``ClusterOperation`` workflow.
"""

from __future__ import annotations

from orchestrator.contracts.ops_types import ClusterPlanView, ClusterProgress


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
    return replan(p, total, planned_with, cluster)


def replan(p: ClusterProgress, total: int, planned_with: int | None, cluster: str) -> int | None:
    """Set ``p.waves_total`` from a plan of ``total`` waves at the grant ``p.granted_hosts``;
    the grant it is now planned with (``planned_with`` was the last, None: the spec's budget)."""
    grant = p.granted_hosts
    if p.waves_total == 0 or total == p.waves_done:  # the first plan, or nothing left
        p.waves_total = total
    elif grant != planned_with and total != p.waves_total:
        before = "the budget" if planned_with is None else f"{planned_with} hosts"
        p.plan_note = (
            f"re-planned from {p.waves_total} to {total} waves: {cluster}'s capacity "
            f"arbiter grants {grant} hosts a wave (planned with {before})"
        )
        p.waves_total = total
    elif total > p.waves_total and p.waves_done >= p.waves_total:
        p.plan_note = (
            f"re-planned from {p.waves_total} to {total} waves: more hosts to change than "
            "planned (back from repair, or newly in scope)"
        )
        p.waves_total = total
    return grant
