"""Approval gates on the real dev server: a campaign waits before its second stage until a
listed approver signs off through the CLI, an operation waits before it starts, and a gate
nobody approves in time fails what it guards."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_handle, campaign_status, final_status
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import CampaignInput, CampaignStatus
from orchestrator.ops.client import operation_status, wait_for_operation
from orchestrator.telemetry import metrics
from tests.e2e import trainctl
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)

pytestmark = pytest.mark.asyncio(loop_scope="session")

GATE = {"before": True, "approvers": ["alice", "ci-bot"], "timeout": "7d"}


def signed_campaign(name: str, second_gate: dict[str, Any], bake: str = "0h") -> dict[str, Any]:
    return {
        "name": name,
        "targets": {"os": "6.12.0-9"},
        "stages": [
            {"name": "canary", "clusters": ["c00"], "hosts": 1},
            {
                "name": "more",
                "clusters": ["c00"],
                "hosts": 2,
                "approval": second_gate,
                "bake": bake,
            },
        ],
        "gates": {"max_failures": 1},
    }


async def eventually(read: Callable[[], Awaitable[Any]], holds: Callable[[Any], bool]) -> Any:
    """``read()`` once ``holds`` of it (asked every quarter second, at most 100 s)."""
    seen = None
    for _ in range(400):
        try:
            seen = await read()
        except LookupError:  # asked before its first workflow task
            seen = None
        if seen is not None and holds(seen):
            return seen
        await asyncio.sleep(0.25)
    raise AssertionError(f"never held: {seen}")


async def test_campaign_waits_at_its_gate_until_a_listed_approver_signs_off(
    dev_env, tmp_home, task_queue, monkeypatch
):
    """The gate before stage two shows who may approve and how; an unlisted approver is
    refused (exit 2, approver); alice's approval is recorded with the client identity and
    holds across continue-as-new (the campaign, with a low history bound, is not asked again)."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    multi_fleet(tmp_home)
    spec = CampaignSpec.model_validate(signed_campaign("signed", GATE, bake="30h"))
    cid = "campaign-signed"
    async with build_worker(dev_env.client, tmp_home / "fleet.db", task_queue):
        handle = await dev_env.client.start_workflow(
            "Campaign",
            CampaignInput(spec=spec, poll_seconds=0.1, max_history_events=50),
            id=cid,
            task_queue=task_queue,
            result_type=CampaignStatus,
        )
        await eventually(
            lambda: campaign_status(dev_env.client, cid),
            lambda st: any(g.state == "waiting" for g in st.approvals),
        )
        code, shown, _ = await trainctl("campaign", "status", "--id", cid, "--json")
        page = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        waiting = (
            "trainctl_approvals_waiting",
            {"workflow": cid, "stage": "more", "gate": "before"},
        )
        metric = metrics.REGISTRY.get_sample_value(waiting[0], waiting[1])
        code_bad, refused, _ = await trainctl(
            "campaign", "approve", "--id", cid, "--stage", "more", "--approver", "mallory", "--json"
        )
        code_ok, approved, err = await trainctl(
            "campaign", "approve", "--id", "signed", "--stage", "more", "--approver", "alice",
            "--reason", "change board said yes", "--json",
        )  # fmt: skip
        final = await asyncio.wait_for(handle.result(follow_runs=True), 120)
        desc = await campaign_handle(dev_env.client, cid).describe()
        audit_code, _, _ = await trainctl("audit", "--json")
    assert code == 0 and shown["state"] == "waiting_for_approval"
    gate = shown["approvals"][0]
    assert (gate["stage"], gate["gate"], gate["approvers"]) == (
        "more",
        "before",
        ["alice", "ci-bot"],
    )
    assert gate["command"] == f"trainctl campaign approve --id {cid} --stage more --gate before"
    assert "ci-bot" in shown["reason"] and gate["command"] in shown["reason"]
    assert "Waiting for approval" in page.current_details  # the UI page: the command too
    assert gate["command"] in page.current_details
    assert [s["state"] for s in shown["stages"]] == ["passed", "waiting_for_approval"]
    assert metric == 1.0
    assert code_bad == 2 and refused["field"] == "approver", refused
    assert code_ok == 0, err
    assert approved["approver"] == "alice" and approved["identity"]
    assert final.state == "succeeded", final.reason
    record = final.approvals[0]
    assert (record.state, record.approver, record.reason) == (
        "approved",
        "alice",
        "change board said yes",
    )
    assert record.identity == approved["identity"]
    assert len(final.approvals) == 1 and desc.run_id != handle.first_execution_run_id
    assert audit_code == 0


async def test_gates_past_their_timeout_fail_and_an_operation_waits_to_start(
    dev_env, tmp_home, task_queue, monkeypatch
):
    """A campaign's gate nobody approves within its timeout fails the stage, saying so; an
    operation with a gate waits before it starts, and runs once a listed approver signs off."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    multi_fleet(tmp_home)
    spec_file = tmp_home / "late.json"
    late = {"before": False, "after": True, "approvers": ["alice"], "timeout": "2s"}
    spec_file.write_text(json.dumps(signed_campaign("late", late)))
    op_file = tmp_home / "op.json"
    op_file.write_text(
        json.dumps(
            {
                "kind": "lower-layer",
                "scope": {"cluster": "c01", "hosts": ["c01-z00-r000-h0[0-3]"]},
                "targets": {"os": "6.12.0-9"},
                "request_id": "signed-op",
                "approval": {"approvers": ["bob"], "timeout": "7d"},
                # a host failing elsewhere in c01 meanwhile must not leave it without room
                "budget": {"max_unavailable": "20%", "maintenance": "4"},
                "max_wait_for_room": "1000h",
            }
        )
    )
    async with build_worker(dev_env.client, tmp_home / "fleet.db", task_queue):
        code, _, err = await trainctl(
            "campaign", "start", "--spec", str(spec_file), "--task-queue", task_queue, "--json"
        )
        assert code == 0, err
        code, _, err = await trainctl(
            "ops", "start", "--spec", str(op_file), "--task-queue", task_queue, "--json"
        )
        assert code == 0, err
        waiting = await eventually(
            lambda: operation_status(dev_env.client, "ops-signed-op"),
            lambda st: st.state == "waiting_for_approval",
        )
        code_bad, refused, _ = await trainctl(
            "ops", "approve", "--id", "ops-signed-op", "--approver", "alice", "--json"
        )
        code_ok, approved, err = await trainctl(
            "ops", "approve", "--id", "ops-signed-op", "--approver", "bob", "--json"
        )
        op = await asyncio.wait_for(wait_for_operation(dev_env.client, "ops-signed-op"), 120)
        final = await asyncio.wait_for(
            final_status(campaign_handle(dev_env.client, "campaign-late")), 120
        )
        audit_code, _, _ = await trainctl("audit", "--json")
    assert waiting.approvals[0].command == "trainctl ops approve --id ops-signed-op"
    assert waiting.approvals[0].approvers == ["bob"] and "bob" in waiting.reason
    assert code_bad == 2 and refused["field"] == "approver"
    assert code_ok == 0 and approved["approver"] == "bob", err
    assert op.state == "succeeded" and op.hosts_changed > 0, op.reason
    assert final.state == "failed"
    stage = final.stages[1]
    assert stage.state == "failed" and "timed out" in stage.reason and "alice" in stage.reason
    assert final.approvals[0].state == "timed_out"
    assert audit_code == 0
