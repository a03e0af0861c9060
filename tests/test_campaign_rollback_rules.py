"""The campaign's pure decisions after a failed stage, and when it starts clusters or holds on
Prometheus: checked directly (fast, no server), as ``Campaign`` sends what they build."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.campaign.gate import failed_look, prom_query
from orchestrator.campaign.progress import clusters_to_start, new_status
from orchestrator.campaign.rollback import (
    forgive_stage,
    hold_reason,
    note_reclaim,
    note_rollback_operation,
    reclaim_request,
    reclaim_verify_request,
    rollback_operation_spec,
    rolled_back_reason,
    round_work,
    unknown_note,
)
from orchestrator.contracts.campaign_spec import CampaignSpec, Gates, PrometheusGate
from orchestrator.contracts.campaign_types import (
    CampaignState,
    ClusterRollback,
    ClusterStage,
    ReclaimResult,
    RollbackGroup,
    RollbackPlan,
    StagePlanModel,
    StageStatus,
)
from orchestrator.contracts.messages import VerifyOutcome
from orchestrator.contracts.ops_types import OperationStatus

WALL = datetime(2026, 1, 1, tzinfo=UTC)
BLAMED = {"os": "6.12.0-9"}


def _spec() -> CampaignSpec:
    return CampaignSpec.model_validate(
        {
            "name": "kernel",
            "targets": {"os": "6.12.0-9", "cuda": "13.1"},
            "stages": [{"name": "canary", "clusters": ["c00", "c01", "c02"]}],
        }
    )


def _plan(parallel: int) -> StagePlanModel:
    clusters = ["c00", "c01", "c02"]
    return StagePlanModel(
        name="canary",
        clusters=clusters,
        hosts_per_cluster=dict.fromkeys(clusters, 4),
        partial=False,
        bake_hours=1.0,
        parallel=parallel,
        gates=Gates(),
    )


def _stage(*states: str) -> StageStatus:
    clusters = {f"c0{i}": ClusterStage(cluster=f"c0{i}", state=s) for i, s in enumerate(states)}
    return StageStatus(name="canary", state="running", clusters=clusters)


def test_clusters_start_in_order_up_to_parallel_beside_the_busy_ones() -> None:
    """A stage starts pending clusters in plan order, only as many as ``parallel`` leaves room
    for beside those rolling or upgrading."""
    ss = _stage("rolling", "pending", "pending")
    assert [c.cluster for c in clusters_to_start(_plan(2), ss)] == ["c01"]
    assert clusters_to_start(_plan(1), ss) == []
    later = clusters_to_start(_plan(5), _stage("done", "pending", "pending"))
    assert [c.cluster for c in later] == ["c01", "c02"]


def test_an_unreadable_prometheus_holds_with_the_first_line_of_why() -> None:
    """The look sends the user name and password file, never a password; a look that failed
    holds the stage with the first line of the error."""
    gate = PrometheusGate(url="http://prom:9090", query="up == 0", username="ops")
    assert prom_query(gate).model_dump() == {
        "url": "http://prom:9090",
        "query": "up == 0",
        "username": "ops",
        "password_file": None,
    }
    answer = failed_look("  timed out\nretrying  ")
    assert answer.firing == -1 and answer.error == "prometheus: the look failed: timed out"
    assert failed_look("").error == "prometheus: the look failed: no reason given"


def test_resuming_after_blame_forgives_the_stage_failures() -> None:
    """An operator resuming a campaign held on blame makes the failures so far count no more:
    failed clusters start again and nothing stays blamed."""
    spec = _spec()
    st = CampaignState(status=new_status(spec, [_plan(1)]), plan=[_plan(1)], blamed=BLAMED)
    ss = _stage("failed", "baking")
    ss.clusters["c00"].failed, ss.clusters["c00"].baseline_out = {"h2": "bad"}, ["h1"]
    assert "blame names os=6.12.0-9 (marked bad)" in hold_reason(ss, st.blamed)
    forgive_stage(st, ss)
    assert ss.clusters["c00"].state == "pending" and ss.clusters["c00"].failed == {}
    assert ss.clusters["c00"].baseline_out == ["h1", "h2"]
    assert ss.clusters["c01"].state == "baking" and ss.state == "running" and st.blamed == {}


def test_a_rollback_operation_is_the_campaign_work_with_no_wait_for_room() -> None:
    """A group with a driver goes back through a CUDA upgrade, the rest as a lower-layer change;
    later rounds have their own request ids; none waits for repairs."""
    spec = _spec()
    lower = rollback_operation_spec(spec, "c00", 0, RollbackGroup(targets=BLAMED, hosts=["h1"]))
    assert lower.kind == "lower-layer" and lower.request_id == "kernel-rollback-c00-0"
    assert lower.max_wait_for_room_hours == 0 and lower.scope.hosts == ["h1"]
    upper = rollback_operation_spec(
        spec, "c00", 1, RollbackGroup(targets={"cuda": "12.8"}, hosts=["h2"]), round_no=2
    )
    assert upper.kind == "cuda-upgrade" and upper.request_id == "kernel-rollback-c00-r2-1"


def test_later_rounds_work_only_where_hosts_are_left() -> None:
    """The first round visits every touched cluster; later ones only those with hosts left."""
    plan = RollbackPlan(
        clusters=[
            ClusterRollback(cluster="c00"),
            ClusterRollback(cluster="c01", reclaim={"h1": BLAMED}),
        ]
    )
    assert [cr.cluster for cr in round_work(plan, 0)] == ["c00", "c01"]
    assert [cr.cluster for cr in round_work(plan, 1)] == ["c01"]


def test_what_a_rollback_could_not_do_is_counted_and_said() -> None:
    """Hosts put back count; failed operations, hosts left to repair or failing again, and hosts
    with no earlier version are said cluster by cluster in the final reason."""
    st = CampaignState(status=new_status(_spec(), [_plan(1)]), plan=[_plan(1)])
    done = OperationStatus(
        operation_id="op", kind="lower-layer", targets=BLAMED, consistency="none", state="succeeded"
    )
    done.hosts_changed = 3
    assert note_rollback_operation(st.status, "c00", done) == ""
    assert note_rollback_operation(st.status, "c00", "refused") == (
        "c00: rollback operation failed: refused"
    )
    cr = ClusterRollback(cluster="c01", reclaim={"h1": BLAMED, "h2": BLAMED}, unknown=["h9"])
    reclaim = reclaim_request(cr, "campaign-kernel", BLAMED, WALL)
    assert reclaim.previous == cr.reclaim
    assert reclaim.reason == "rolling back os=6.12.0-9 (campaign-kernel)"
    res = ReclaimResult(updated=["h1", "h2"], left={"h3": "in repair"})
    verify = reclaim_verify_request(cr, "campaign-kernel", res, WALL)
    assert verify.per_host == {"h1": BLAMED, "h2": BLAMED} and verify.quarantine_failed
    notes = note_reclaim(st.status, cr, res, VerifyOutcome(passed=["h1"], failed={"h2": "x"}))
    assert notes == [
        "c01: 1 hosts out of service left to repair",
        "c01: 1 hosts failed after rollback (quarantined)",
    ]
    assert st.status.hosts_rolled_back == 4
    assert unknown_note(ClusterRollback(cluster="c00")) == ""
    reason = rolled_back_reason(_stage("failed"), BLAMED, 4, {"c01": unknown_note(cr), "c00": ""})
    assert reason == (
        "stage canary failed; blame names os=6.12.0-9; rolled back 4 hosts to their previous "
        "versions; c01: 1 hosts carry it with no earlier version on record (e.g. h9), left as "
        "they are"
    )
