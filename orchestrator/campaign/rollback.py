"""What a campaign decides when a stage fails and blame names one of its versions.

``on_failure: hold`` keeps every host as it is until an operator resumes (the stage's failures
so far are then forgiven: ``forgive_stage``) or aborts. ``on_failure: rollback`` puts each host
that got the blamed version back on the one it had before (``planning.rollback`` says which hosts
and to what): hosts in service through one bulk operation per cluster and set of previous versions
(``rollback_operation_spec``), hosts the bad build put out of service reclaimed, reinstalled and
verified (``reclaim_request``, ``reclaim_verify_request``). What could not be rolled back is said
in words, cluster by cluster, and gathered into the campaign's final reason.

Plain functions over the campaign's models: the workflow sends what they build and calls its
activities and children; these are tested without it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import (
    CampaignState,
    CampaignStatus,
    ClusterRollback,
    ReclaimRequest,
    ReclaimResult,
    RollbackGroup,
    RollbackPlan,
    StageStatus,
)
from orchestrator.contracts.messages import VerifyOutcome
from orchestrator.contracts.models import UPPER_LAYER
from orchestrator.contracts.ops_spec import OperationSpec, Scope
from orchestrator.contracts.ops_types import OperationStatus, VerifyRequest

#: Looks at what is left to roll back (hosts a train still held may come back quarantined).
ROLLBACK_ROUNDS = 3


def blamed_pairs(blamed: dict[str, str]) -> str:
    """``component=version`` pairs, sorted, for the reasons the operator reads."""
    return ", ".join(f"{c}={v}" for c, v in sorted(blamed.items()))


def hold_reason(ss: StageStatus, blamed: dict[str, str]) -> str:
    """Why a campaign with ``on_failure: hold`` waits, and what the operator can do."""
    return (
        f"stage {ss.name} failed and blame names {blamed_pairs(blamed)} (marked bad): held with "
        "every host as it is; clear the version (`trainctl versions clear`) and resume, or "
        "abort"
    )


def forgive_stage(st: CampaignState, ss: StageStatus) -> None:
    """The operator resumed a campaign held on blame: the stage's failures so far count no more,
    its failed clusters start again, and nothing stays blamed."""
    for cs in ss.clusters.values():
        cs.baseline_out = sorted({*cs.baseline_out, *cs.failed})
        cs.failed = {}
        if cs.state == "failed":
            cs.state, cs.reason = "pending", ""
    ss.state, ss.reason = "running", ""
    st.blamed = {}


def round_work(plan: RollbackPlan, round_no: int) -> list[ClusterRollback]:
    """The clusters a rollback round works on: every one first, then only those with hosts left
    (a later round that finds none ends the rollback)."""
    if round_no == 0:
        return plan.clusters
    return [cr for cr in plan.clusters if cr.groups or cr.reclaim]


def rollback_operation_spec(
    spec: CampaignSpec, cluster: str, i: int, group: RollbackGroup, round_no: int = 0
) -> OperationSpec:
    """The bulk operation putting one group of in-service hosts back on their versions."""
    upper = any(c in UPPER_LAYER for c in group.targets)
    nth = f"r{round_no}-" if round_no else ""
    fields: dict[str, Any] = {
        "kind": "cuda-upgrade" if upper else "lower-layer",
        "scope": Scope(cluster=cluster, hosts=group.hosts),
        "targets": group.targets,
        "request_id": f"{spec.name}-rollback-{cluster}-{nth}{i}",
        # Sized as the campaign's own train: a rollback is the campaign's work.
        "budget": spec.train.budget,
        # No waiting for repairs: refused when there is no room now, the next round
        # (after the quarantined hosts were reclaimed) looks again.
        "max_wait_for_room": 0,
    }
    if spec.train.drain is not None:
        fields["drain"] = spec.train.drain
    if spec.schedule is not None:
        fields["schedule"] = spec.schedule
    return OperationSpec.model_validate(fields)


def is_rollback_operation(op_id: str, parent_id: str | None) -> bool:
    """A campaign's rollback operation (``rollback_operation_spec``): its parent is a
    campaign and its id names the rollback."""
    return bool(parent_id and parent_id.startswith("campaign-")) and "-rollback-" in op_id


def _count_rolled_back(status: CampaignStatus, cluster: str, hosts: int) -> None:
    """Count ``hosts`` put back on ``cluster``, in the campaign's total and per cluster."""
    status.hosts_rolled_back += hosts
    if hosts:
        per = status.rolled_back_per_cluster
        per[cluster] = per.get(cluster, 0) + hosts


def note_rollback_operation(
    status: CampaignStatus, cluster: str, result: OperationStatus | str
) -> str:
    """Count the hosts a rollback operation put back; what it left undone ('' when nothing).
    ``result`` is the operation's final status, or why it failed."""
    if isinstance(result, str):
        return f"{cluster}: rollback operation failed: {result}"
    _count_rolled_back(status, cluster, result.hosts_changed)
    if result.state != "succeeded":
        return f"{cluster}: rollback operation {result.state}: {result.reason}"
    return ""


def unknown_note(cr: ClusterRollback) -> str:
    """Hosts carrying the blamed version with nothing earlier on record ('' when none)."""
    if not cr.unknown:
        return ""
    return (
        f"{cr.cluster}: {len(cr.unknown)} hosts carry it with no earlier version on "
        f"record (e.g. {cr.unknown[0]}), left as they are"
    )


def reclaim_request(
    cr: ClusterRollback, owner: str, blamed: dict[str, str], wall: datetime
) -> ReclaimRequest:
    """Reclaim the cluster's hosts the bad build took out and reinstall what they had before."""
    return ReclaimRequest(
        cluster=cr.cluster,
        owner=owner,
        wall=wall,
        previous=cr.reclaim,
        reason=f"rolling back {blamed_pairs(blamed)} ({owner})",
    )


def reclaim_verify_request(
    cr: ClusterRollback, owner: str, res: ReclaimResult, wall: datetime
) -> VerifyRequest:
    """Verify the reinstalled hosts on their own previous versions: return or quarantine them."""
    return VerifyRequest(
        cluster=cr.cluster,
        owner=owner,
        wall=wall,
        hosts=res.updated,
        per_host={h: cr.reclaim[h] for h in res.updated},
        return_passed=True,
        quarantine_failed=True,
        reason=f"{owner}: failed after rollback",
    )


def note_reclaim(
    status: CampaignStatus, cr: ClusterRollback, res: ReclaimResult, back: VerifyOutcome
) -> list[str]:
    """Count the reclaimed hosts that verified; what the reclaim left undone, in words."""
    _count_rolled_back(status, cr.cluster, len(back.passed))
    left = []
    if res.left:
        left.append(f"{cr.cluster}: {len(res.left)} hosts out of service left to repair")
    if res.failed or back.failed:
        left.append(
            f"{cr.cluster}: {len(res.failed) + len(back.failed)} hosts failed after rollback "
            "(quarantined)"
        )
    return left


def rolled_back_reason(
    ss: StageStatus, blamed: dict[str, str], hosts: int, notes: dict[str, str]
) -> str:
    """The final reason of a rolled-back campaign: what failed, what went back, what is left
    (``notes``: cluster -> what could not be rolled back there)."""
    left = [n for _, n in sorted(notes.items()) if n]
    return f"stage {ss.name} failed; blame names {blamed_pairs(blamed)}; rolled back " + (
        f"{hosts} hosts to their previous versions" + (f"; {'; '.join(left)}" if left else "")
    )
