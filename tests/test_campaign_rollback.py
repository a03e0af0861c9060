"""A blamed build rolled back, or held, by its campaign (issue 12, items 2 and 3).

Real dev server, real SQLite ``multi`` fleet at speed max, the worker in this process:

- a kernel that breaks half the hosts it lands on: the canary fails its gate with some hosts
  serving on the bad kernel; ``on_failure: rollback`` (the default) drains those through a
  lower-layer bulk operation back to their previous kernel, and reclaims the quarantined ones
  (no job to drain), reinstalls, verifies and returns them; the campaign ends ``rolled_back``
  (exit 1) with no host serving on the bad kernel and the record's audit clean;
- ``on_failure: hold`` keeps every host as it is: the campaign waits in ``held`` with the
  held-on-blame gauge at 1 (what ``CampaignHeldOnBlame`` alerts on) until an operator resumes
  or aborts it; the gauge falls back to 0 at the end.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from temporalio.client import WorkflowExecutionStatus

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import (
    campaign_handle,
    campaign_status,
    final_status,
)
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import CampaignStatus
from tests.e2e import audit_ok, trainctl
from tests.rule_tests import promtool_rule_test
from tests.test_campaign_e2e import (
    ever_had,
    hosts,
    multi_fleet,
    no_train_left,  # noqa: F401 (the autouse fixture)
    run_campaign,
)

ASYNC = pytest.mark.asyncio(loop_scope="session")

BAD = "6.12.0-bad"


def _canary(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "targets": {"os": BAD},
        "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 8, "bake": "1h"}],
        "gates": {"max_failures": 1},
        "train": {"domain_size": 4},
        **extra,
    }


async def _inject(rate: str) -> None:
    fault = ("--cluster", "c00", "--component", "os", "--version", BAD, "--rate", rate)
    code, _, err = await trainctl("fleet", "inject-fault", *fault, "--json")
    assert code == 0, err


@ASYNC
async def test_rollback_drains_serving_hosts_and_reclaims_quarantined_ones(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home, seed=3)
    await _inject("0.5")
    before = {r[0]: r[3]["os"] for r in hosts(path)}
    code, status = await run_campaign(dev_env, tmp_home, path, task_queue, _canary("half-bad"))
    assert code == 1 and status.state == "rolled_back", status.reason
    assert (status.blame[0].component, status.blame[0].version) == ("os", BAD), status.blame
    got = ever_had(path, "os", BAD)
    rows = {r[0]: r for r in hosts(path)}
    assert got and {rows[h][1] for h in got} == {"c00"}
    assert not [r for r in rows.values() if r[2] == "in_service" and r[3]["os"] == BAD], (
        status.reason
    )
    back = [h for h in got if rows[h][2] == "in_service" and rows[h][3]["os"] == before[h]]
    assert status.hosts_rolled_back == len(back) > 0, (status.reason, [rows[h] for h in got])
    # Some hosts passed on the bad kernel and served: the rollback operation drained them.
    op = dev_env.client.get_workflow_handle("ops-half-bad-rollback-c00-0")
    assert (await op.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert all(h in back or rows[h][2] in ("quarantined", "in_repair") for h in got)
    assert audit_ok(path)


def _held_gauge(campaign: str) -> float | None:
    return REGISTRY.get_sample_value("trainctl_campaign_held_on_blame", {"campaign": campaign})


async def _wait_state(client: Any, cid: str, want: str) -> CampaignStatus:
    status = None
    for _ in range(600):
        status = await campaign_status(client, cid)
        if status.state == want:
            return status
        await asyncio.sleep(0.2)
    raise AssertionError(f"never {want}: {status}")


@ASYNC
async def test_hold_keeps_hosts_and_waits_for_the_operator(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home)
    await _inject("1.0")
    spec = CampaignSpec.model_validate(_canary("hold-bad", on_failure="hold"))

    spec_file = tmp_home / "hold.json"
    spec_file.write_text(spec.model_dump_json(by_alias=True))
    async with build_worker(dev_env.client, path, task_queue):
        # --wait hears of the hold at once (exit 1): the campaign now waits for an operator.
        code, out, err = await trainctl(
            "campaign",
            "start",
            "--spec",
            str(spec_file),
            "--wait",
            "--json",
            "--task-queue",
            task_queue,
        )
        assert code == 1 and out["state"] == "held" and out["held_on_blame"], (out, err)
        held = await _wait_state(dev_env.client, spec.workflow_id, "held")
        assert "blame names os=6.12.0-bad" in held.reason, held.reason
        assert held.hosts_rolled_back == 0
        for _ in range(300):  # the report activity follows the state change
            if _held_gauge("hold-bad") == 1.0:
                break
            await asyncio.sleep(0.1)
        assert _held_gauge("hold-bad") == 1.0
        got = ever_had(path, "os", BAD)
        rows = {r[0]: r for r in hosts(path)}
        assert got and all(rows[h][3]["os"] == BAD for h in got), "hold changed hosts back"
        code, out, err = await trainctl("campaign", "resume", "--id", "hold-bad", "--json")
        assert code == 0 and out["state"] == "running", (out, err)
        code, out, err = await trainctl("campaign", "abort", "--id", "hold-bad", "--json")
        assert code == 0, (out, err)
        final = await asyncio.wait_for(
            final_status(campaign_handle(dev_env.client, spec.workflow_id)), 120
        )
    assert final.state == "aborted", final
    assert _held_gauge("hold-bad") == 0.0
    assert audit_ok(path)


def test_held_on_blame_alert_fires_in_promtool(tmp_path: Path) -> None:
    """promtool's rule test: the gauge at 1 fires CampaignHeldOnBlame for that campaign only."""
    summary = (
        "campaign hold-bad: held on blame of its version; see `trainctl campaign status --id "
        "hold-bad` and `trainctl versions list`"
    )
    series = "trainctl_campaign_held_on_blame"
    alert = "CampaignHeldOnBlame"
    expected = {"exp_labels": {"severity": "page", "campaign": "hold-bad"}}
    expected["exp_annotations"] = {"summary": summary}
    promtool_rule_test(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{series}{{campaign="hold-bad"}}', "values": "0 1x10"},
                    {"series": f'{series}{{campaign="fine"}}', "values": "0x10"},
                ],
                "alert_rule_test": [
                    {"eval_time": "0m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "5m", "alertname": alert, "exp_alerts": [expected]},
                ],
            }
        ],
    )


def test_a_host_in_repair_comes_back_on_its_rolled_back_version(tmp_home: Path) -> None:
    """A host repair holds (its own hardware failed) while its build is rolled back is not
    reclaimed; its reimage on the way back gives it the previous version instead, so it never
    serves on the bad one (the fleet store's own repair pipeline, persisted across opens)."""
    from orchestrator.fleet import SqliteFleet

    path = multi_fleet(tmp_home)
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            name = sim.host_names()[5]
            prev = sim.host(name).versions["os"]
            sim.host(name).versions = {**sim.host(name).versions, "os": BAD}
            sim.dirty_hosts.add(name)
            sim.hand_to_repair(name, "test", "gpu fell off the bus")
            assert not sim.reclaim(name, "campaign-x", "rolling back")  # repair owes it a fix
            assert sim.set_reimage(name, {"os": prev}, "campaign-x")
            now = sim.now
        later = fleet.anchor_wall + timedelta(seconds=(now + 80.0) * 3600.0 / fleet.speed)
        h = fleet.peek("c00", later).host(name)  # past any repair (12-48 h, retries)
    finally:
        fleet.close()
    assert h.state == "in_service" and h.versions["os"] == prev, (h.state, h.versions)


@ASYNC
async def test_a_bad_cuda_rolls_back_driver_and_cuda_together(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    """Driver/CUDA are one consistency pair: a blamed CUDA goes back with its driver, through a
    cuda-upgrade operation (whole job groups), and no job ever runs on a mixed pair."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home, seed=2)
    fault = ("--cluster", "c00", "--component", "cuda", "--version", "13.1", "--rate", "0.4")
    code, _, err = await trainctl("fleet", "inject-fault", *fault, "--json")
    assert code == 0, err
    upper = {"gpu_driver": "590.44.01", "cuda": "13.1"}
    before = {r[0]: (r[3]["gpu_driver"], r[3]["cuda"]) for r in hosts(path)}
    spec = {
        "name": "cuda-bad",
        "targets": upper,
        "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 16, "bake": "1h"}],
        "gates": {"max_failures": 0},
    }
    code, status = await run_campaign(dev_env, tmp_home, path, task_queue, spec)
    assert code == 1 and status.state == "rolled_back", status.reason
    assert status.blame and status.blame[0].campaign == "cuda-bad", status.blame
    assert status.blame[0].component in upper, status.blame
    got = ever_had(path, "cuda", "13.1")
    assert got, "the canary changed no host"
    rows = {r[0]: r for r in hosts(path)}
    serving_new = [r[0] for r in rows.values() if r[2] == "in_service" and r[3]["cuda"] == "13.1"]
    assert not serving_new, (serving_new, status.reason)
    for h in got:  # back on its own previous pair, both together, or out with a reason
        pair = (rows[h][3]["gpu_driver"], rows[h][3]["cuda"])
        assert pair == before[h] or rows[h][2] in ("quarantined", "in_repair"), (h, rows[h])
    assert audit_ok(path)  # includes: no job on hosts of mixed driver/CUDA


def test_the_ui_details_name_the_suspect() -> None:
    """On call reads which change broke the stage in the workflow's details (Temporal UI)."""
    from orchestrator.campaign.ui import campaign_details
    from orchestrator.contracts.campaign_types import Blame, CampaignState, StagePlanModel

    spec = CampaignSpec.model_validate(_canary("ui-bad"))
    status = CampaignStatus(
        campaign_id=spec.workflow_id, name=spec.name, targets=spec.targets, state="rolling_back"
    )
    status.blame = [
        Blame(component="os", version=BAD, campaign="ui-bad", failing=4, passing=0, score=1.0)
    ]
    plan = StagePlanModel(
        name="canary",
        clusters=["c00"],
        hosts_per_cluster={"c00": 8},
        partial=True,
        bake_hours=1.0,
        parallel=1,
        gates=spec.gates,
    )
    text = campaign_details(spec, CampaignState(status=status, plan=[plan]))
    assert text.startswith("**Rolling back**"), text
    line = f"- **os {BAD}** · rollout: ui-bad · failing: 4 · passing: 0 · score: 1.00"
    assert line in text and "|---" not in text, text  # a list: the UI draws no table padding
