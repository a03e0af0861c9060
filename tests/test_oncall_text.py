"""What on-call reads, one source per figure and the command that moves things on (issue 25).

Pure pages and CLI lines (the browser test reads the same text rendered), plus the capacity
arbiter's answer to a train alone on its cluster, on the real dev server.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from activities.arbiter_activities import ArbiterActivities
from orchestrator.app.cli.campaign import progress_line
from orchestrator.app.worker import build_worker
from orchestrator.arbiter.ui import arbiter_details
from orchestrator.campaign.progress import finish_status, new_status
from orchestrator.campaign.ui import campaign_details
from orchestrator.contracts.arbiter_types import (
    AcquireRequest,
    ArbiterState,
    HolderEntry,
    arbiter_workflow_id,
)
from orchestrator.contracts.campaign_spec import CampaignSpec, Gates
from orchestrator.contracts.campaign_types import CampaignState, StagePlanModel
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainState
from orchestrator.contracts.ui_text import explain_wait, item_list
from orchestrator.train.ui import train_details
from tests.train_helpers import make_fleet

RUN_TOGETHER = ("|---", "holdsgrantedwants", "Draining0/", "pendingc00", "1/41")


def _campaign() -> tuple[CampaignSpec, CampaignState]:
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.8.0-50"},
            "stages": [
                {"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"},
                {"name": "rest", "clusters": ["c01"]},
            ],
        }
    )
    common = {"bake_hours": 2.0, "parallel": 1, "gates": Gates()}
    plan = [
        StagePlanModel(
            name="canary", clusters=["c00"], hosts_per_cluster={"c00": 4}, partial=True, **common
        ),
        StagePlanModel(
            name="rest", clusters=["c01"], hosts_per_cluster={"c01": 64}, partial=False, **common
        ),
    ]
    st = CampaignState(status=new_status(spec, plan), plan=plan)
    return spec, st


def test_a_halted_train_names_its_failing_host_and_the_next_command() -> None:
    spec = TrainSpec(cluster="c00", targets={"os": "6.12.0-bad"})
    st = TrainState(phase="halted", reason="3 hosts failed in a row (limit 3)")
    st.counts = CycleCounts(hosts_total=64, visited=15, quarantined=1, in_repair=2)
    st.recent_failures = [("c00-z00-r000-h00", "verification failed: bus bw 0.61")] * 3
    text = train_details(spec, st, {}, 3, 3600.0)
    assert "`c00-z00-r000-h00` (3 times): verification failed" in text
    assert "`trainctl fleet host c00-z00-r000-h00`" in text
    assert "`trainctl train resume --cluster c00`" in text
    assert "15 of 64 hosts visited" in text and "1 quarantined" in text
    assert "Since this train started" in text  # not 'So far' beside this cycle's counts
    assert not any(bad in text for bad in RUN_TOGETHER)


def test_campaign_and_arbiter_pages_are_lists_not_tables() -> None:
    spec, st = _campaign()
    st.status.stages[0].state, st.status.stages[0].failures = "running", 1
    st.status.stages[0].failure_limit, st.status.stages[0].hosts_changed = 1, 1
    st.status.state, st.status.reason = "held", "stage canary held by Prometheus: up == 0"
    text = campaign_details(spec, st)
    assert "hosts changed: 1 of 4 · failures: 1 (the gate allows at most 1)" in text
    assert "**Next:**" in text and "campaign abort --id k" in text
    assert not any(bad in text for bad in RUN_TOGETHER)
    lines = item_list(["holder", "holds", "granted"], [("train-c00", 3, 3)])
    assert lines == ["- **train-c00** · holds: 3 · granted: 3"]
    page = arbiter_details(
        ArbiterState(
            cluster="c00",
            holders={
                "train-c00": HolderEntry(
                    holder="train-c00",
                    workflow_id="train-c00",
                    kind="train",
                    exclusive=False,
                    want=8,
                    holding=3,
                    granted=3,
                    limit=3,
                    since=datetime(2026, 12, 2, tzinfo=UTC),
                )
            },
        )
    )
    assert "holds:" in page and not any(bad in page for bad in RUN_TOGETHER)


def test_an_aborted_campaign_leaves_no_stage_running_or_baking() -> None:
    spec, st = _campaign()
    st.status.stages[0].state, st.status.stages[0].bake_remaining_hours = "baking", 2.0
    st.abort = "aborted by operator"
    finish_status(st, "aborted")
    assert st.status.state == "aborted"
    assert [s.state for s in st.status.stages] == ["aborted", "pending"]
    assert st.status.stages[0].bake_remaining_hours is None
    assert "aborted" in progress_line(st.status)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_train_alone_hears_the_budget_not_an_empty_list(dev_env, tmp_home) -> None:
    """Wanting 8 under a budget of 3 with nobody else there: the arbiter says the budget
    allows 3, never 'the capacity budget is shared with ' and nobody."""
    queue = f"tq-{uuid.uuid4()}"
    path = make_fleet(tmp_home, 3600.0)
    async with build_worker(dev_env.client, path, queue):
        acts = ArbiterActivities(dev_env.client, queue)
        grant = await acts.acquire(
            AcquireRequest(
                cluster="c00", holder="train-c00", workflow_id="train-c00", want=8, limit=3
            )
        )
        await dev_env.client.get_workflow_handle(arbiter_workflow_id("c00", queue)).terminate(
            "done"
        )
    assert grant.granted == 3
    assert "allows 3 hosts" in grant.reason and "shared" not in grant.reason
    assert "shared with ," not in explain_wait(grant.reason)
