"""Recurring operations on Temporal Schedules, on the real dev server, through the CLI.

``ops start --cron`` creates a Schedule (seen by the ``temporal`` CLI too); triggering it runs
the operation as a new operation each time, never two at once (overlap SKIP); ``schedule
pause|delete`` steer it. A nightly-reboot style operation on two racks, at speed ``max``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from temporalio.client import WorkflowExecutionStatus

from orchestrator.app.cli import main
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.fleet.settings import MAX_SPEED
from tests.e2e import audit_ok, worker
from tests.test_hardening_train import address, answer, cli
from tests.train_helpers import make_fleet

RACKS = ["z01-r005", "z01-r006"]


async def _schedule(dev_env, *args: str) -> dict[str, Any]:
    return answer(await cli(dev_env, "schedule", *args), 0)


async def _wait_idle(dev_env, sid: str, runs: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        listed = await _schedule(dev_env, "list")
        (view,) = [s for s in listed["schedules"] if s["schedule_id"] == sid]
        if view["runs_total"] >= runs and not view["running"]:
            return view
        assert time.monotonic() < deadline, f"runs did not end: {view}"
        await asyncio.sleep(0.5)


async def test_recurring_operation_runs_on_a_schedule_without_overlap(dev_env, tmp_home, tmp_path):
    """The Schedule is in `temporal schedule list`; three triggers (one while a run is going)
    give runs that never overlap, each its own operation that succeeded; pause and delete work."""
    path = make_fleet(tmp_home, MAX_SPEED)
    rid = f"nightly-reboot-{uuid.uuid4().hex[:6]}"
    spec_file: Path = tmp_path / "reboot.json"
    spec_file.write_text(
        json.dumps(
            {
                "kind": "reboot",
                "scope": {"cluster": "c00", "racks": RACKS},
                "budget": {"max_unavailable": "10%"},
                "drain": {"max_wait": "2h"},
                "max_failures": 16,
                "request_id": rid,
            }
        )
    )
    queue = f"tq-{uuid.uuid4()}"
    sid = f"ops-{rid}"
    async with worker(dev_env, path, queue):
        made = answer(
            await cli(
                dev_env, "ops", "start", "--spec", str(spec_file), "--cron", "0 3 1 1 *",
                "--task-queue", queue,
            ),
            0,
        )  # fmt: skip
        try:
            assert made["schedule_id"] == sid and made["overlap"] == "skip", made
            assert made["cron"] == ["0 3 1 1 *"] and made["next_runs"], made
            again = await cli(dev_env, "ops", "start", "--spec", str(spec_file), "--cron", "@daily")
            assert answer(again, 2)["field"] == "request_id"

            listed = subprocess.run(
                [str(temporal_cli_path()), "schedule", "list", "--address", address(dev_env)]
                + ["--namespace", dev_env.client.namespace, "-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert listed.returncode == 0, listed.stderr
            assert sid in listed.stdout

            await _schedule(dev_env, "trigger", "--id", sid)
            await _schedule(dev_env, "trigger", "--id", sid)  # skipped while the first runs
            await _wait_idle(dev_env, sid, 1)
            await _schedule(dev_env, "trigger", "--id", sid)
            view = await _wait_idle(dev_env, sid, 2)
            assert view["runs_total"] + view["skipped_overlap"] == 3, view
            runs = view["recent_runs"]
            assert len(runs) == view["runs_total"] >= 2
            spans = []
            for run in runs:
                desc = await dev_env.client.get_workflow_handle(run["workflow_id"]).describe()
                assert desc.status == WorkflowExecutionStatus.COMPLETED, run
                handle = dev_env.client.get_workflow_handle(
                    run["workflow_id"], result_type=OperationStatus
                )
                result = await handle.result()
                assert result.state == "succeeded" and result.operation_id == run["workflow_id"]
                spans.append((desc.start_time, desc.close_time))
            spans.sort()
            for (_, end), (begin, _) in zip(spans, spans[1:], strict=False):
                assert end is not None and end <= begin, f"runs overlapped: {spans}"

            paused = await _schedule(dev_env, "pause", "--id", sid, "--reason", "change freeze")
            assert paused["paused"] and paused["note"] == "change freeze"
            await _schedule(dev_env, "delete", "--id", sid)
            listed_after = await _schedule(dev_env, "list")
            assert sid not in {s["schedule_id"] for s in listed_after["schedules"]}
            gone = await cli(dev_env, "schedule", "pause", "--id", sid)
            assert answer(gone, 2)["field"] == "id"
        finally:
            with contextlib.suppress(Exception):  # deleted by the test already
                await dev_env.client.get_schedule_handle(sid).delete()
    audit_ok(path)


def test_bad_cron_is_bad_input(tmp_home, tmp_path):
    """`ops start --cron` with a malformed cron exits 2 naming cron, before any connection."""
    spec_file = tmp_path / "reboot.json"
    spec_file.write_text(json.dumps({"kind": "reboot", "scope": {"cluster": "c00"}}))
    res = CliRunner().invoke(
        main, ["ops", "start", "--spec", str(spec_file), "--cron", "61 * * * *", "--json"]
    )
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout.splitlines()[0])
    assert out["field"] == "cron" and "minute" in out["error"]


async def test_recurring_campaign_is_a_schedule(dev_env, tmp_home, tmp_path):
    """`campaign start --cron` creates the campaign's Schedule (listed with kind campaign,
    overlap skip); the same name again exits 2 naming it; delete removes it."""
    make_fleet(tmp_home, MAX_SPEED)
    name = f"bmc-weekly-{uuid.uuid4().hex[:6]}"
    spec_file = tmp_path / "campaign.json"
    spec_file.write_text(
        json.dumps(
            {
                "name": name,
                "targets": {"bmc": "2.18.1"},
                "stages": [{"name": "all", "clusters": ["c00"]}],
            }
        )
    )
    args = ("campaign", "start", "--spec", str(spec_file), "--cron", "0 4 * * 0")
    made = answer(await cli(dev_env, *args), 0)
    sid = made["schedule_id"]
    try:
        assert made["kind"] == "campaign" and made["workflow_type"] == "Campaign", made
        assert made["overlap"] == "skip" and made["cron"] == ["0 4 * * 0"]
        assert answer(await cli(dev_env, *args), 2)["field"] == "name"
        listed = await _schedule(dev_env, "list")
        assert sid in {s["schedule_id"] for s in listed["schedules"] if s["kind"] == "campaign"}
    finally:
        await _schedule(dev_env, "delete", "--id", sid)
