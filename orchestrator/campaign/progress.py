"""The campaign's bookkeeping between its commands: its status, stage by stage and cluster by
cluster, as the looks and children's results come in.

Plain functions over ``CampaignState`` and the activities' answers, so the workflow keeps only its
steps (which activity, which child, when) and this is tested without one. The gates' verdicts
are ``campaign.gate``'s.
"""

from __future__ import annotations

from orchestrator.campaign import gate
from orchestrator.contracts.approvals import ApprovalSpec
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import (
    BlameResult,
    CampaignReport,
    CampaignState,
    CampaignStatus,
    ClusterStage,
    Progress,
    StageHosts,
    StagePlanModel,
    StageStatus,
)
from orchestrator.contracts.ops_types import OperationStatus


def new_status(spec: CampaignSpec, plan: list[StagePlanModel]) -> CampaignStatus:
    """A fresh campaign's status: every planned stage pending."""
    return CampaignStatus(
        campaign_id=spec.workflow_id,
        name=spec.name,
        targets=spec.targets,
        stages=[
            StageStatus(
                name=p.name,
                bake_hours=p.bake_hours,
                hosts_planned=sum(p.hosts_per_cluster.values()),
            )
            for p in plan
        ],
    )


def open_stage(plan: StagePlanModel, ss: StageStatus) -> None:
    """A pending stage begins: running over its clusters, or skipped when it has none left."""
    if ss.state == "pending":
        ss.state = "running" if plan.clusters else "skipped"
        ss.clusters = {c: ClusterStage(cluster=c) for c in plan.clusters}


def note_broken(ss: StageStatus) -> bool:
    """A cluster's bulk operation failed (it rolled its wave back): the stage fails, saying
    which and why. False when none did."""
    broken = [c for c in ss.clusters.values() if c.state == "failed"]
    if not broken:
        return False
    ss.state = "failed"
    ss.reason = "; ".join(f"{c.cluster}: {c.reason}" for c in broken)
    return True


def all_done(ss: StageStatus) -> bool:
    """Every cluster of the stage changed and baked."""
    return bool(ss.clusters) and all(c.state == "done" for c in ss.clusters.values())


def clusters_to_start(plan: StagePlanModel, ss: StageStatus) -> list[ClusterStage]:
    """The stage's pending clusters to start now, in order: as many as ``parallel`` leaves
    room for beside those rolling or upgrading."""
    busy = sum(1 for c in ss.clusters.values() if c.state in ("rolling", "upgrading"))
    pending = [c for c in ss.clusters.values() if c.state == "pending"]
    return pending[: max(0, plan.parallel - busy)]


def note_hosts(cs: ClusterStage, chosen: StageHosts) -> None:
    """The hosts chosen for the cluster's stage, and those already down when it began."""
    cs.hosts, cs.baseline_out, cs.in_scope = chosen.hosts, chosen.baseline_out, chosen.in_scope


def note_blame(st: CampaignState, ss: StageStatus, found: BlameResult) -> None:
    """Blame's answer for a failed stage: the suspects, ours that it named, what it marked."""
    st.status.blame = found.blame
    st.blamed = dict(found.blamed)
    if not st.blamed:  # nothing failed enough to blame, but ours was marked bad (by hand)
        st.blamed = gate.marked_bad(ss)
    if found.marked:
        ss.reason += f" (blamed and marked bad: {', '.join(found.marked)})"


def apply_progress(cs: ClusterStage, prog: Progress) -> None:
    """A look's counts into the cluster's stage."""
    cs.in_scope, cs.changed, cs.pending = prog.in_scope, prog.changed, prog.pending
    cs.attempted = prog.attempted
    cs.in_flight, cs.failed, cs.fleet_hours = prog.in_flight, prog.failed, prog.fleet_hours
    cs.marked_bad = dict(prog.marked_bad)
    if prog.cost is not None:
        cs.cost = prog.cost


def operation_ended(
    status: CampaignStatus, cs: ClusterStage, result: OperationStatus | str, fleet_hours: float
) -> None:
    """A cluster's bulk operation came back (its status, or why it failed): the cluster bakes
    from ``fleet_hours``, or fails; the hosts it rolled back count for the campaign."""
    if not isinstance(result, str) and result.hosts_rolled_back:  # waves it rolled back itself
        status.hosts_rolled_back += result.hosts_rolled_back
        per = status.rolled_back_per_cluster
        per[cs.cluster] = per.get(cs.cluster, 0) + result.hosts_rolled_back
    if isinstance(result, str) or result.state != "succeeded":
        cs.state = "failed"
        cs.reason = result if isinstance(result, str) else result.reason
    else:
        cs.state, cs.done_hours = "baking", fleet_hours


def touched_clusters(status: CampaignStatus) -> list[str]:
    """Clusters some stage started on (what the campaign hands back or rolls back), sorted."""
    return sorted(
        {c for s in status.stages for c, cs in s.clusters.items() if cs.state != "pending"}
    )


def campaign_report(status: CampaignStatus) -> CampaignReport:
    """What the metrics get (``trainctl_campaign_*``), from the rolled-up status."""
    stage = next((s for s in status.stages if s.name == status.stage), None)
    return CampaignReport(
        campaign=status.name,
        state=status.state,
        stage=status.stage,
        failure_limit=stage.failure_limit if stage else None,
        hosts_changed=status.hosts_changed,
        hosts_quarantined=status.hosts_quarantined,
        hosts_rolled_back=status.hosts_rolled_back,
        held_on_blame=status.held_on_blame or status.state == "rolling_back",
        approvals_waiting=[g for g in status.approvals if g.state == "waiting"],
    )


def stage_approval(spec: CampaignSpec, stage: str, gate: str) -> ApprovalSpec | None:
    """The approval the spec asks for at ``stage``'s ``gate`` (before or after), if any."""
    found = next((s for s in spec.stages if s.name == stage), None)
    approval = found.approval if found is not None else None
    if approval is None or not getattr(approval, gate):
        return None
    return approval


#: Where a stage or a cluster of it stands while work goes on: an ended campaign keeps none.
_LIVE = ("running", "rolling", "upgrading", "baking", "held", "waiting_for_approval")


def _settle_stages(st: CampaignState, outcome: str, reason: str) -> None:
    """Every stage and cluster in its final state: no stage goes on running, baking or held
    under an abort or a rollback, no bake has time left, and the clusters a rolled-back stage
    touched name the versions marked bad (its status read ``rolling``, ``bake 2h left`` and
    ``marked_bad: {}`` after the rollback)."""
    for s in st.status.stages:
        s.bake_remaining_hours = None
        for cs in s.clusters.values():
            if outcome in ("aborted", "rolled_back") and cs.state in _LIVE:
                cs.state = outcome
            if outcome == "rolled_back" and cs.state != "pending" and not cs.marked_bad:
                cs.marked_bad = dict(st.blamed)
        if outcome in ("aborted", "rolled_back") and s.state in _LIVE:
            s.state, s.reason = outcome, reason


def finish_status(st: CampaignState, outcome: str) -> str:
    """The final state and its reason in the status (nothing holds it any more); the reason."""
    if outcome == "aborted":
        reason = st.abort
    elif outcome == "failed":
        failed = next((s for s in st.status.stages if s.state == "failed"), None)
        reason = f"stage {failed.name} failed: {failed.reason}" if failed else "failed"
    elif outcome == "rolled_back":
        reason = st.status.reason
    else:
        reason = f"every stage passed ({len(st.plan)})"
    gate.roll_up_campaign(st.status)
    _settle_stages(st, outcome, reason)
    st.status.state, st.status.reason = outcome, reason
    st.status.held_on_blame = False  # ended: nothing holds any more
    return reason
