"""Campaigns end to end on the real dev server and a real SQLite ``multi`` fleet at speed max.

A good kernel rolls canary → first cluster → the rest and every in-service host of the four
clusters ends on it, flaky hosts quarantined, none rolled back; a bad kernel (an injected fault
that breaks every host it lands on) stops in its canary with at most the canary's 4 hosts ever
on it and the other clusters untouched. The audit checks that no host was lost on the way.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from orchestrator.app.worker import build_worker
from orchestrator.contracts.campaign_types import CampaignStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from tests.e2e import audit_ok, trainctl

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: The issue's spec, without its Prometheus gate (tests/test_campaign_prometheus.py has one).
ISSUE_SPEC: dict[str, Any] = {
    "name": "kernel-6-12",
    "targets": {"os": "6.12.0-9"},
    "scope": {"cluster": "*"},
    "stages": [
        {"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"},
        {"name": "first-cluster", "clusters": ["c00"], "bake": "4h"},
        {"name": "rest", "clusters": "*", "parallel": 2},
    ],
    "gates": {"max_failures": "5%"},
}


@pytest_asyncio.fixture(autouse=True, loop_scope="session")
async def no_train_left(dev_env: Any) -> AsyncIterator[None]:
    """Trains are one per cluster (``train-c00``) on the shared dev server: none may outlive
    the test that started it (its worker is gone), or the next test's campaign would find it."""
    yield
    for cluster in get_preset("multi").cluster_names():
        handle = dev_env.client.get_workflow_handle(f"train-{cluster}")
        with contextlib.suppress(RPCError):
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test ended")


#: 10 fleet hours per wall second: a campaign's drains and bakes take seconds, and few hosts
#: fail meanwhile (at ``max``, 1e6, a minute of wall time is two fleet years of failures and
#: repairs, whose reimages give hosts the campaign's targets too).
CAMPAIGN_SPEED = 36_000.0


def multi_fleet(home: Path, seed: int = 1, speed: float = CAMPAIGN_SPEED) -> Path:
    path = home / "fleet.db"
    SqliteFleet.create(path, get_preset("multi"), seed, speed).close()
    return path


def hosts(path: Path) -> list[tuple[str, str, str, dict[str, str]]]:
    """(name, cluster, state, versions) of every host, read straight from the fleet file."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, cluster, state, versions FROM hosts").fetchall()
    finally:
        conn.close()
    return [(n, c, s, json.loads(v)) for n, c, s, v in rows]


def ever_had(path: Path, component: str, version: str) -> set[str]:
    """Hosts the fleet's append-only record shows updated to ``component=version``."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT host, detail FROM events WHERE kind = 'updated'").fetchall()
    finally:
        conn.close()
    return {h for h, d in rows if json.loads(d).get("after", {}).get(component) == version}


async def run_campaign(
    env: Any, home: Path, path: Path, queue: str, spec: dict[str, Any]
) -> tuple[int, CampaignStatus]:
    """`trainctl campaign start --wait --json` of ``spec`` with a worker of ``path`` running."""
    spec_file = home / f"{spec['name']}.json"
    spec_file.write_text(json.dumps(spec))
    args = ("campaign", "start", "--spec", str(spec_file), "--wait", "--json")
    async with build_worker(env.client, path, queue):
        code, out, err = await trainctl(*args, "--task-queue", queue)
    assert "error" not in out, err
    # --wait says on stderr what it waits for (issue 25: it printed nothing for minutes).
    assert f"campaign-{spec['name']}: waiting for it to end" in err, err
    return code, CampaignStatus.model_validate(out)


async def test_good_kernel_rolls_through_every_cluster(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    """The issue's spec with os 6.12.0-9 exits 0: every in-service host of c00-c03 on it."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home)
    code, status = await run_campaign(dev_env, tmp_home, path, task_queue, ISSUE_SPEC)
    assert code == 0, status.reason
    assert status.state == "succeeded", status.reason
    assert [s.state for s in status.stages] == ["passed", "passed", "passed"]
    assert status.hosts_rolled_back == 0
    rows = hosts(path)
    in_service = [r for r in rows if r[2] == "in_service"]
    assert {r[1] for r in in_service} == {"c00", "c01", "c02", "c03"}
    assert all(r[3]["os"] == "6.12.0-9" for r in in_service), "an in-service host was missed"
    down = [r for r in rows if r[2] != "in_service"]
    assert all(r[2] in ("quarantined", "in_repair") for r in down)
    # Hosts repaired meanwhile got the kernel from repair's reimage, not from a visit.
    assert 0 < status.hosts_changed <= len(in_service) + len(down)
    assert audit_ok(path)


async def test_bad_kernel_stops_in_its_canary(dev_env, tmp_home, task_queue, monkeypatch) -> None:
    """A kernel breaking every host it lands on exits 1 in the canary: at most 4 hosts got it."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home)
    fault = ("--cluster", "c00", "--component", "os", "--version", "6.12.0-bad", "--rate", "1.0")
    code, _, err = await trainctl("fleet", "inject-fault", *fault, "--json")
    assert code == 0, err
    spec = {**ISSUE_SPEC, "name": "kernel-bad", "targets": {"os": "6.12.0-bad"}}
    before = {r[0]: r[3]["os"] for r in hosts(path)}
    code, status = await run_campaign(dev_env, tmp_home, path, task_queue, spec)
    assert code == 1
    # on_failure defaults to rollback: the hosts that got it are back on their previous kernel.
    assert status.state == "rolled_back", status.reason
    assert status.stages[0].state == "failed" and status.stage == "canary"
    assert [s.state for s in status.stages[1:]] == ["pending", "pending"]
    got = ever_had(path, "os", "6.12.0-bad")
    assert 0 < len(got) <= 4
    rows = hosts(path)
    assert all(r[3]["os"] != "6.12.0-bad" for r in rows if r[1] != "c00")
    assert all(r[2] == "in_service" or r[1] == "c00" or r[2] == "in_repair" for r in rows)
    assert not [r[0] for r in rows if r[2] == "in_service" and r[3]["os"] == "6.12.0-bad"]
    now = {r[0]: r for r in rows}
    back = [h for h in got if now[h][3]["os"] == before[h]]
    assert status.hosts_rolled_back == len([h for h in back if now[h][2] == "in_service"]) > 0
    # Every host that got it is back on its kernel, or out of service with a reason.
    assert all(h in back or now[h][2] in ("quarantined", "in_repair") for h in got), [
        now[h] for h in got
    ]
    assert audit_ok(path)
    # Blame names the kernel (issue 12), which is then bad fleet-wide: refused as a target.
    top = status.blame[0]
    assert (top.component, top.version, top.campaign) == ("os", "6.12.0-bad", "kernel-bad")
    assert top.failing >= 2 and top.score >= 0.5, status.blame
    assert "marked bad: os=6.12.0-bad" in status.stages[0].reason
    code, listed, err = await trainctl("versions", "list", "--json")
    assert code == 0 and [(e["component"], e["version"]) for e in listed["bad_versions"]] == [
        ("os", "6.12.0-bad")
    ], (listed, err)
    train_spec = tmp_home / "bad-train.json"
    train_spec.write_text(json.dumps({"cluster": "c01", "targets": {"os": "6.12.0-bad"}}))
    code, out, err = await trainctl("train", "start", "--spec", str(train_spec), "--json")
    assert code == 2 and out["field"] == "targets.os", (out, err)


async def test_cuda_canary_runs_as_a_bulk_operation(dev_env, tmp_home, task_queue) -> None:
    """Driver/CUDA targets go to a BulkOperation child over the canary's hosts only, then bake
    in the cluster's fleet time (a host failing its verification, as any may in a live run, is
    within the gate)."""
    from orchestrator.campaign.client import start_campaign
    from orchestrator.campaign.ui import campaign_details
    from orchestrator.contracts.campaign_spec import CampaignSpec
    from orchestrator.contracts.campaign_types import CampaignState

    # One fleet hour per wall second: an operation's wait for room (outages filling the
    # budget, up to 12 fleet hours) takes seconds, not the instant it would at 10 hours a second.
    path = multi_fleet(tmp_home, speed=3600.0)
    upper = {"gpu_driver": "590.44.01", "cuda": "13.1"}
    spec = CampaignSpec.model_validate(
        {
            "name": "cuda-canary",
            "targets": upper,
            "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 8, "bake": "1h"}],
            "gates": {"max_failures": 1},
        }
    )
    async with build_worker(dev_env.client, path, task_queue):
        started = await start_campaign(dev_env.client, spec, task_queue=task_queue, wait=True)
        op = dev_env.client.get_workflow_handle("ops-cuda-canary-canary-c00")
        op_state = (await op.describe()).status
    status = started.status
    assert status is not None and status.state == "succeeded", status
    assert op_state == WorkflowExecutionStatus.COMPLETED
    new = [r for r in hosts(path) if all(r[3].get(c) == v for c, v in upper.items())]
    assert len(new) == 8 and {r[1] for r in new} == {"c00"}
    # the campaign's page: what it and its operation cost c00's jobs, from the record
    cost = status.stages[0].clusters["c00"].cost
    assert cost is not None and cost.total_gpu_hours > 0
    assert "Cost to jobs" in campaign_details(spec, CampaignState(status=status, plan=[]))
    assert audit_ok(path)
