"""Each figure a command or page shows has one source, so the answers agree with each other.

Pure pages and answers where no workflow is needed; the real dev server and a worker where a
command's answer comes from one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from orchestrator.app.cli.ops import print_status, start_answer
from orchestrator.app.worker import build_worker
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.ops_spec import load_spec
from orchestrator.contracts.ops_types import ClusterProgress, OperationStatus
from orchestrator.contracts.train_types import TrainStatus
from orchestrator.ops.client import OperationStart
from orchestrator.planning.ops_result import ClusterPlan, OperationPlan, Wave
from orchestrator.train.client import start_train
from tests.e2e import trainctl
from tests.train_helpers import make_fleet
from tests.train_helpers import spec as train_spec

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


async def _end(env: Any, *ids: str) -> None:
    """Terminate what a test started that would outlive its worker."""
    for wid in ids:
        handle = env.client.get_workflow_handle(wid)
        with contextlib.suppress(RPCError):
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test ended")


@pytest.mark.asyncio(loop_scope="session")
async def test_campaign_start_json_says_where_it_stands(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    """``campaign start --json`` answers the campaign's status, never ``"status": null``."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = make_fleet(tmp_home, 3600.0)
    spec = tmp_home / "k.json"
    spec.write_text(
        json.dumps(
            {
                "name": "story",
                "targets": {"os": "6.8.0-50"},
                "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"}],
            }
        )
    )
    try:
        async with build_worker(dev_env.client, path, task_queue):
            args = ("campaign", "start", "--spec", str(spec), "--json", "--task-queue", task_queue)
            code, out, err = await trainctl(*args)
    finally:
        await _end(dev_env, "campaign-story", "train-c00")
    assert code == 0, err
    assert out["started"] is True and out["campaign_id"] == "campaign-story"
    assert out["status"] is not None, out
    assert out["status"]["state"] == "running" and out["status"]["targets"] == {"os": "6.8.0-50"}


def _plan() -> OperationPlan:
    """The plan ``ops plan`` gave: 6 hosts in 2 waves of c00, 2 deferred until repaired."""
    hosts = [f"c00-z00-r000-h{i:02d}" for i in range(8)]
    return OperationPlan(
        operation_id="ops-cuda-12-6-c00",
        kind="cuda-upgrade",
        consistency="job",
        targets={"cuda": "12.6"},
        fleet_hours=0.0,
        hosts_total=8,
        hosts_to_change=8,
        waves=[
            Wave(index=0, cluster="c00", hosts=hosts[:3]),
            Wave(index=1, cluster="c00", hosts=hosts[3:6]),
        ],
        already_done=[],
        deferred=hosts[6:],
        clusters=[
            ClusterPlan(
                cluster="c00",
                hosts_total=8,
                hosts_in_scope=8,
                out_of_service=2,
                budget_limit=3,
                wave_cap=3,
                hosts_to_change=8,
                already_done=0,
                deferred=2,
                waves=2,
                est_hours=3.0,
            )
        ],
        estimated_duration_hours=3.0,
        gpu_hours_out_of_service=0.0,
        gpu_hours_lost=0.0,
        jobs_affected=0,
        jobs_interrupted=0,
    )


def test_a_repeated_ops_start_tells_the_plans_story(capsys) -> None:
    """Asked again before its workflow planned, ``ops start`` answers the plan's waves, and it
    counts hosts as ``ops plan`` does: those in waves, the deferred ones apart."""
    spec = load_spec(EXAMPLES / "cuda.yaml")
    live = OperationStatus(
        operation_id="ops-cuda-12-6-c00", kind="cuda-upgrade", targets={}, consistency="job"
    )
    again = OperationStart(
        operation_id=live.operation_id, run_id="r", started=False, already_running=True, status=live
    )
    out = start_answer(spec, _plan(), again)
    assert out["waves_total"] == 2 and out["clusters"]["c00"]["waves_total"] == 2
    assert out["plan"]["hosts_in_waves"] == 6 and out["plan"]["deferred"] == 2
    print_status(out)
    text = capsys.readouterr().out
    assert "plan: 6 hosts to change in 2 waves, 2 deferred until repaired, ~3 h" in text
    assert "8 hosts to change" not in text


def test_a_repeated_ops_start_after_planning_answers_the_operations_waves(capsys) -> None:
    """Asked again once its workflow planned, ``ops start`` answers the operation's own waves,
    not a plan made now that counts only what is left (``3 waves`` beside ``0/4 waves``)."""
    spec = load_spec(EXAMPLES / "cuda.yaml")
    live = OperationStatus(
        operation_id="ops-cuda-12-6-c00",
        kind="cuda-upgrade",
        targets={},
        consistency="job",
        waves_total=4,
        clusters={"c00": ClusterProgress(cluster="c00", state="verifying", waves_total=4)},
    )
    again = OperationStart(
        operation_id=live.operation_id, run_id="r", started=False, already_running=True, status=live
    )
    out = start_answer(spec, _plan(), again)
    assert out["waves_total"] == 4 and "plan" not in out
    print_status(out)
    text = capsys.readouterr().out
    assert "0/4 waves" in text and "2 waves" not in text and "plan:" not in text


def test_ops_status_prints_every_replan_with_its_reason(capsys) -> None:
    """An operation whose wave count changed says each time why, under its cluster."""
    note = "re-planned from 2 to 3 waves: hosts failed or went to repair"
    status = OperationStatus(
        operation_id="ops-cuda-12-6-c00",
        kind="cuda-upgrade",
        targets={},
        consistency="job",
        waves_total=3,
        waves_done=2,
        clusters={
            "c00": ClusterProgress(cluster="c00", waves_total=3, waves_done=2, replans=[note])
        },
    )
    print_status(status.model_dump(mode="json"))
    text = capsys.readouterr().out
    assert "2/3 waves" in text and note in text


@pytest.mark.asyncio(loop_scope="session")
async def test_a_domain_page_names_the_versions_its_hosts_get(
    dev_env, tmp_home, task_queue
) -> None:
    """A domain of a campaign's rollout: its summary names the rollout's os, as its details do."""
    path = make_fleet(tmp_home, 3600.0)
    canary = ["c00-z00-r000-h00", "c00-z00-r000-h01"]
    rollout = {"campaign": "k", "stage": "canary", "targets": {"os": "6.8.0-50"}, "hosts": canary}
    # This test's own domains only: other tests' domains of c00 carry the same ids.
    query = f'WorkflowType="DomainMaintenance" AND TaskQueue="{task_queue}"'
    summary = ""
    try:
        async with build_worker(dev_env.client, path, task_queue):
            await start_train(dev_env.client, train_spec(rollout=rollout), task_queue=task_queue)
            for _ in range(100):
                async for wf in dev_env.client.list_workflows(query):
                    if wf.id.startswith("train-c00"):
                        desc = await dev_env.client.get_workflow_handle(wf.id).describe()
                        summary = await desc.static_summary() or ""
                if summary:
                    break
                await asyncio.sleep(0.2)
    finally:
        await _end(dev_env, "train-c00")
    assert "os 6.8.0-50" in summary and "6.8.0-45" not in summary, summary


def test_the_demos_last_line_and_summary_agree(capsys) -> None:
    """The demo's last progress line counts visited and quarantined hosts as its summary does."""
    from orchestrator.app.cli.demo import _CycleBar, _print
    from orchestrator.app.demo import _figures

    status = TrainStatus(
        cluster="c00",
        state="stopped",
        cycles_completed=1,
        hosts_total=128,
        hosts_visited_this_cycle=126,
        in_maintenance=0,
        quarantined=0,
        in_repair=2,
        domain_size=8,
        budget=CapacityBudget(max_unavailable="10%"),
        targets={"os": "6.8.0-50"},
    )
    _CycleBar(128).status(status)
    figures = {
        **_figures(status, 59.8),
        "preset": "small",
        "hosts_lost": 0,
        "budget_violations": 0,
        "lost_gpu_hours": 0.0,
        "audit_ok": True,
        "fleet": "fleet.db",
    }
    _print(figures)
    seen = capsys.readouterr()
    assert "cycle: 126/128 hosts visited, 0 in maintenance, 2 quarantined or in repair" in seen.err
    assert "small: 126/128 hosts visited, 2 quarantined or in repair" in seen.out


def test_the_demos_summary_gives_the_cycle_as_a_duration(capsys) -> None:
    """The demo's summary says how long the cycle took as people read it, one of a thing in
    the singular, and ``fleet status`` says ``1 job``."""
    from orchestrator.app.cli.demo import _print
    from orchestrator.app.cli.fleet import _print_status as print_fleet

    _print(
        {
            "preset": "small",
            "hosts_visited": 128,
            "hosts_total": 128,
            "hosts_quarantined": 0,
            "hosts_lost": 1,
            "budget_violations": 1,
            "job_interruptions": 1,
            "lost_gpu_hours": 8.0,
            "cycle_fleet_hours": 59.8,
            "cycle_wall_seconds": 21.627,
            "audit_ok": True,
            "fleet": "fleet.db",
        }
    )
    print_fleet(
        {
            "preset": "small",
            "fleet_hours": 70.0,
            "hosts_total": 128,
            "gpus_total": 1024,
            "jobs_running": 1,
            "utilisation": 0.5,
            "states": {"in_service": 128},
            "versions": {},
        }
    )
    out = capsys.readouterr().out
    assert (
        "1 host lost (out of service with no owner), 1 budget violation, 1 job interruption" in out
    )
    assert "cycle took 2 d 12 h of fleet time in 22 s." in out and "59.8" not in out
    assert "128 hosts, 1,024 GPUs, 1 job, utilisation" in out


def test_the_campaign_demos_summary_reads_right(capsys) -> None:
    """The campaign demo's summary: wall time as a duration, a stage with no limit says so
    (never ``at most None``), one host in the singular."""
    from orchestrator.app.cli.demo_campaign import _print as print_campaign_demo

    stage = {"name": "rest", "state": "pending", "clusters": ["c01"], "hosts_changed": 0}
    print_campaign_demo(
        {
            "campaign_id": "campaign-k",
            "preset": "multi",
            "state": "succeeded",
            "reason": "every stage passed (1)",
            "hosts_changed": 1,
            "hosts_quarantined": 0,
            "hosts_rolled_back": 0,
            "audit_ok": True,
            "wall_seconds": 41.237,
            "stages": [{**stage, "failures": 0, "failure_limit": None}],
            "clusters": {},
        }
    )
    out = capsys.readouterr().out
    assert "1 host changed" in out and "41 s of wall time." in out
    assert "rest: pending on c01: 0 changed, 0 failed (no limit yet)" in out and "None" not in out


def test_fleet_host_behind_counts_one_host_in_the_singular(capsys) -> None:
    """``fleet host --behind`` says ``repair: 1 host``, never ``1 hosts``."""
    from orchestrator.app.cli.fleet_host import _print_behind

    host = {"host": "c02-h04", "waiting_since_hours": 149.2, "detail": "in repair (gpu_hbm3)"}
    _print_behind(
        {
            "behind": 1,
            "clusters": ["c02"],
            "groups": [{"kind": "repair", "count": 1, "hosts": [host]}],
            "trains_asked": True,
        }
    )
    out = capsys.readouterr().out
    assert "1 host not on their targets" in out and "repair: 1 host, longest" in out
    assert "1 hosts" not in out


def test_a_canary_hosts_targets_name_the_campaigns_version() -> None:
    """``fleet host`` of a canary host names the campaign's os as its target, covered by the
    train it rides; a host outside the canary gets no such target."""
    from orchestrator.planning.host_explain import Coverage, HostFacts, TrainFacts, explain_host

    canary = frozenset({"c03-h00"})
    train = TrainFacts(phase="running", cluster="c03", rollouts=(({"os": "6.8.0-50"}, canary),))

    def targets(name: str) -> list[tuple[str, str, str | None]]:
        host = HostFacts(
            name=name,
            cluster="c03",
            state="in_service",
            owner="",
            reason="",
            versions={"os": "6.8.0-45"},
            now=10.0,
        )
        answers = explain_host(host, Coverage(), {}, {"train-c03": train})
        return [(a.component, a.want, a.covered_by) for a in answers]

    assert targets("c03-h00") == [("os", "6.8.0-50", "train-c03")]
    assert targets("c03-h01") == []


def test_ops_plan_says_a_first_wave_starts_at_once() -> None:
    """``ops plan``: the first wave starts at once (not ``after 0 s``), the next after the
    first's estimate; a cap of one host is ``1 host``."""
    plan = _plan()
    plan.waves[0].est_hours, plan.waves[1].est_start_hours = 1.5, 1.5
    plan.clusters[0].wave_cap = 1
    text = plan.summary()
    assert "wave 1 of c00: 3 hosts, 0 jobs (0 interrupted), starts at once, ~1 h 30 min" in text
    assert "wave 2 of c00: 3 hosts, 0 jobs (0 interrupted), starts after 1 h 30 min" in text
    assert "of up to 1 host (budget" in text and "after 0 s" not in text


def test_a_visited_host_that_goes_to_repair_stays_visited(tmp_path) -> None:
    """The visited count went from 9 to 8 while a train was paused: a host it had visited
    went to repair. Visited this cycle never drops; the host also counts as in repair, and no
    figure that adds them up (the demo's bar, the ETA, the projection) counts it twice."""
    from datetime import UTC, datetime

    from orchestrator.app.cli.train import _progress
    from orchestrator.contracts.train_types import TrainState
    from orchestrator.execution.cycle import cycle_counts, settled
    from orchestrator.fleet import SqliteFleet
    from orchestrator.train.status import train_status, visit_figures
    from orchestrator.train.ui import eta_line, train_details

    wall = datetime(2026, 1, 5, tzinfo=UTC)
    fleet = SqliteFleet(make_fleet(tmp_path, 3600.0, wall=wall))
    spec = train_spec()
    try:
        with fleet.cluster("c00", wall) as sim:
            st = TrainState(cycle_started_hours=sim.now)
            serving = [h.name for h in sim.snapshot().hosts if h.state == "in_service"]
            visited = [n for n in serving if sim.hosts[n].owner == ""][:9]
            assert all(sim.check_in_place(n, "train-c00") for n in visited)
            st.counts = before = cycle_counts(sim, st.cycle_started_hours, "train-c00")
            was = train_status(spec, st)
            sim.hand_to_repair(visited[0], "fleet", "gpu fell off the bus")
            st.counts = after = cycle_counts(sim, st.cycle_started_hours, "train-c00")
            now = train_status(spec, st)
    finally:
        fleet.close()
    assert was.hosts_visited_this_cycle == now.hosts_visited_this_cycle == 9
    assert now.in_repair == was.in_repair + 1 and now.hosts_visited_now_out == 1
    # Each host once: the demo's figures, the ETA's settled hosts and the projection.
    assert sum(visit_figures(now)) == sum(visit_figures(was))
    assert settled(after) == settled(before)
    assert now.cycle_projected_end_hours == was.cycle_projected_end_hours
    assert eta_line(st, after, None).startswith(f"{128 - settled(after)} hosts left this cycle")
    page = train_details(spec, st, {}, 12, None)
    assert "9 of 128 hosts visited (7%; 1 of them since quarantined or in repair)" in page, page
    line = _progress(now.model_dump())
    assert "9/128 visited (1 since quarantined or in repair)" in line, line
