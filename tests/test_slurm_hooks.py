"""A missing install hook is refused before any Slurm node is touched (issue 23, #3).

``fleet init --backend slurm`` without ``--backend-config`` is valid (every key is optional),
but then the backend has no hook to install anything. A train, an operation or a campaign with
an ``os`` target must exit 2 naming ``hooks.os`` up front (the CLI asks the backend which
components it can install), and an operation started through the API is refused by its own
check the same way, instead of draining nodes and quarantining them on "no hook".
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.fleet import fleet_path
from orchestrator.lab.slurm import LabInfo, lab_down, lab_up
from tests.cli_inproc import cli
from tests.e2e import outcome, start_op, terminate, write_spec

OS = "6.8.0-45"


@pytest.fixture
def lab2(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        yield lab_up(tmp_home, nodes=2)
    finally:
        lab_down(tmp_home)


def _sinfo(lab: LabInfo) -> dict[str, str]:
    env = {**os.environ, "SLURM_CONF": lab.slurm_conf}
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N|%T|%E"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return {line.split("|")[0]: line for line in out.splitlines()}


async def test_no_install_hook_is_refused_before_any_node(
    dev_env, tmp_home, task_queue, lab2, monkeypatch
):
    """train start, ops start and campaign start exit 2 naming hooks.os; an operation started
    through the API is refused by its check; Slurm shows no node drained; the audit is ok."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    init = CliRunner().invoke(
        cli_main,
        ["fleet", "init", "--backend", "slurm", "--slurm-conf", lab2.slurm_conf, "--json"],
    )
    assert init.exit_code == 0, init.output
    before = _sinfo(lab2)
    assert all("idle" in line or "mixed" in line for line in before.values()), before

    train = write_spec(
        tmp_home / "train.json",
        {"cluster": lab2.cluster, "domain_size": 1, "budget": {"max_unavailable": 1},
         "targets": {"os": OS}},
    )  # fmt: skip
    op_spec = {
        "kind": "lower-layer",
        "scope": {"cluster": lab2.cluster},
        "targets": {"os": OS},
        "budget": {"max_unavailable": 1},
        "request_id": f"hooks-{uuid.uuid4().hex[:6]}",
    }
    op = write_spec(tmp_home / "op.json", op_spec)
    campaign = write_spec(
        tmp_home / "campaign.json",
        {"name": "no-hook", "targets": {"os": OS}, "scope": {"cluster": lab2.cluster},
         "stages": [{"name": "all", "clusters": [lab2.cluster]}],
         "train": {"domain_size": 1, "budget": {"max_unavailable": 1}}},
    )  # fmt: skip
    for args in (
        ("train", "start", "--spec", str(train)),
        ("ops", "plan", "--spec", str(op)),
        ("ops", "start", "--spec", str(op), "--task-queue", task_queue),
        ("campaign", "start", "--spec", str(campaign), "--task-queue", task_queue),
    ):
        code, out, err = await cli(*args, "--json")
        assert code == 2 and out["field"] == "hooks.os", (args, out, err)
        assert "no install hook for os" in out["error"], out

    # Through the API (no CLI pre-flight): the operation's own check refuses it.
    async with build_worker(dev_env.client, fleet_path(tmp_home), task_queue):
        try:
            status = await outcome(await start_op(dev_env, task_queue, op_spec))
        finally:
            await terminate(dev_env, arbiter_workflow_id(lab2.cluster, task_queue))
    assert status.state == "failed" and "hooks.os" in status.reason, status

    after = _sinfo(lab2)
    assert after == before, (before, after)  # no node drained, no reason set
    assert not any("trainctl" in line for line in after.values()), after
    code, report, err = await cli("audit", "--json")
    assert code == 0, (report, err)
    assert json.dumps(report)


def test_lab_up_says_a_lab_runs_and_refuses_another_size(tmp_home: Path, lab2: LabInfo) -> None:
    """`lab slurm up` with the 2-node lab running reports it as running, not as new; asking
    for 4 nodes is refused naming nodes (issue 24, low)."""
    again = CliRunner().invoke(cli_main, ["lab", "slurm", "up", "--json"])
    assert again.exit_code == 0, again.output
    out = json.loads(again.stdout)
    assert out["already_running"] is True and out["nodes"] == lab2.nodes
    bigger = CliRunner().invoke(cli_main, ["lab", "slurm", "up", "--nodes", "4", "--json"])
    assert bigger.exit_code == 2 and json.loads(bigger.stdout)["field"] == "nodes", bigger.output
