"""The campaign's pure rules, outside any workflow: controls by state, what it hands on, its
bookkeeping and the Prometheus gate's line.

``Campaign`` delegates its validators, its train handoffs and bulk operation specs, and its
status bookkeeping to these functions; here they are checked directly (fast, no server).
"""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.campaign.controls import require_state
from orchestrator.campaign.gate import note_prometheus
from orchestrator.campaign.progress import (
    campaign_report,
    finish_status,
    new_status,
    note_blame,
    note_broken,
    open_stage,
    operation_ended,
    touched_clusters,
)
from orchestrator.campaign.requests import stage_operation_spec, train_handoff
from orchestrator.contracts.campaign_spec import CampaignSpec, Gates
from orchestrator.contracts.campaign_types import (
    BlameResult,
    CampaignState,
    ClusterStage,
    PromAnswer,
    StagePlanModel,
    StageStatus,
)

UPPER = {"gpu_driver": "590.44.01", "cuda": "13.1"}


def _spec(**extra: Any) -> CampaignSpec:
    return CampaignSpec.model_validate(
        {
            "name": "mixed",
            "targets": {"os": "6.12.0-9", **UPPER},
            "stages": [{"name": "canary", "clusters": ["c00", "c01"], "hosts": 4}],
            **extra,
        }
    )


def _plan(clusters: list[str], **gates: Any) -> StagePlanModel:
    return StagePlanModel(
        name="canary",
        clusters=clusters,
        hosts_per_cluster={c: 4 for c in clusters},
        partial=True,
        bake_hours=1.0,
        parallel=1,
        gates=Gates(**gates),
    )


def _state(spec: CampaignSpec, plan: StagePlanModel) -> CampaignState:
    return CampaignState(status=new_status(spec, [plan]), plan=[plan])


def test_controls_follow_the_state() -> None:
    """Nothing is paused before it starts or after it ends; a campaign held on blame takes a
    resume (the operator takes the blame on) though it is not paused."""
    plan = _plan(["c00"])
    with pytest.raises(ValueError, match="has not started"):
        require_state(None, "pause")
    st = _state(_spec(), plan)
    require_state(st, "pause")
    with pytest.raises(ValueError, match="cannot resume a campaign that is running"):
        require_state(st, "resume")
    st.status.state, st.status.held_on_blame = "held", True
    require_state(st, "resume")
    st.status.state, st.status.held_on_blame = "succeeded", False
    with pytest.raises(ValueError, match="cannot abort a campaign that is succeeded"):
        require_state(st, "abort")


def test_driver_targets_go_to_an_operation_and_the_rest_to_the_train() -> None:
    """The bulk operation gets only driver/CUDA targets, the stage's hosts and the gate's limit;
    the train's handoff carries the campaign's train settings."""
    spec = _spec(gates={"max_failures": 1})
    cs = ClusterStage(cluster="c00", hosts=["a", "b"], in_scope=2)
    op = stage_operation_spec(spec, _plan(["c00"], max_failures=1), "canary", cs)
    assert dict(op.targets) == UPPER and op.scope.hosts == ["a", "b"]
    assert op.max_failures == 1 and op.request_id == "mixed-canary-c00"
    ride = train_handoff(spec, "c00", "ride", targets={"os": "6.12.0-9"}, hosts=["a"])
    assert ride.campaign == spec.workflow_id and ride.domain_size == spec.train.domain_size
    assert ride.targets == {"os": "6.12.0-9"} and ride.hosts == ["a"]


def test_a_failed_operation_fails_its_stage_and_names_the_cluster() -> None:
    """An operation that came back failed fails its cluster; the stage then fails saying which;
    only clusters the stage began on are handed back."""
    spec, plan = _spec(), _plan(["c00", "c01"])
    st = _state(spec, plan)
    ss = st.status.stages[0]
    open_stage(plan, ss)
    assert ss.state == "running" and list(ss.clusters) == ["c00", "c01"]
    assert not note_broken(ss)
    operation_ended(st.status, ss.clusters["c00"], "wave 1 rolled back", 3.0)
    assert note_broken(ss) and ss.reason == "c00: wave 1 rolled back"
    assert touched_clusters(st.status) == ["c00"]
    assert finish_status(st, "failed") == "stage canary failed: c00: wave 1 rolled back"
    assert st.status.state == "failed" and campaign_report(st.status).state == "failed"


def test_prometheus_holds_the_stage_then_clears_its_line() -> None:
    """A firing query holds the stage and says what fires; an empty answer clears that part of
    the gate line, leaving the failure gate's own words."""
    ss = StageStatus(name="canary", state="baking", gate="0 failed of at most 1")
    assert not note_prometheus(ss, PromAnswer(firing=2, sample=["up{job=a}", "up{job=b}"]))
    assert ss.state == "held"
    firing = "prometheus: 2 series firing, e.g. up{job=a}, up{job=b}"
    assert ss.gate == f"0 failed of at most 1 | {firing}"
    assert note_prometheus(ss, PromAnswer())
    assert ss.gate == "0 failed of at most 1"


def test_blame_of_our_version_is_kept_and_said() -> None:
    """The version blame names as ours is kept for the rollback, and the stage says it was
    marked bad."""
    st = _state(_spec(), _plan(["c00"]))
    ss = st.status.stages[0]
    ss.reason = "3 hosts failed"
    note_blame(st, ss, BlameResult(blamed={"os": "6.12.0-9"}, marked=["os=6.12.0-9"]))
    assert st.blamed == {"os": "6.12.0-9"}
    assert ss.reason == "3 hosts failed (blamed and marked bad: os=6.12.0-9)"
