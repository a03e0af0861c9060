"""The shipped example specs load and plan, the UI's text stays bounded, and the long-running
commands log JSON lines (issue 15, items 1, 3 and 4).

``examples/`` holds the specs the README runs: a train, a CUDA upgrade and a campaign. The
markdown the Temporal UI shows must stay within the server's and the UI's limits even for a
``meta-24k`` domain or wave of thousands of hosts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.contracts.campaign_spec import load_campaign_spec
from orchestrator.contracts.ops_spec import load_spec as load_operation_spec
from orchestrator.contracts.ops_types import ClusterProgress, OperationStatus
from orchestrator.contracts.train_spec import load_train_spec
from orchestrator.contracts.train_types import TrainState
from orchestrator.contracts.ui_text import DETAILS_LIMIT, SUMMARY_LIMIT, explain_wait, one_line
from orchestrator.ops.ui import cluster_details, operation_details
from orchestrator.train.ui import domain_details, train_details
from tests.train_helpers import make_fleet

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REPO = EXAMPLES.parent


def test_examples_load() -> None:
    """The README's example specs are valid: a train, a CUDA upgrade and a campaign."""
    train = load_train_spec(EXAMPLES / "train.yaml")
    assert train.cluster == "c00" and "gpu_driver" not in train.targets
    cuda = load_operation_spec(EXAMPLES / "cuda.yaml")
    assert cuda.kind == "cuda-upgrade" and set(cuda.targets) == {"gpu_driver", "cuda"}
    campaign = load_campaign_spec(EXAMPLES / "campaign.yaml")
    assert [s.name for s in campaign.stages] == ["canary", "first-cluster", "rest"]
    bad = load_campaign_spec(EXAMPLES / "bad-campaign.yaml")
    assert bad.targets == {"os": "6.12.0-bad"} and bad.stages[0].hosts == 4
    signed = load_campaign_spec(EXAMPLES / "approved-campaign.yaml")
    gate = signed.stages[1].approval
    assert gate is not None and (gate.before, gate.after, gate.timeout_hours) == (True, True, 168)
    assert gate.approvers == ["change-board", "oncall"] and signed.stages[0].approval is None


def test_campaign_examples_plan_over_multi(tmp_home: Path) -> None:
    """The campaign examples plan over ``multi`` as `campaign plan` does: a 4-host canary on
    c00, then c00, then the rest."""
    from orchestrator.fleet import SqliteFleet
    from orchestrator.fleet.presets import get_preset
    from orchestrator.fleet.settings import MAX_SPEED
    from orchestrator.planning.campaign_plan import plan_campaign

    fleet = SqliteFleet.create(tmp_home / "fleet.db", get_preset("multi"), 1, MAX_SPEED)
    try:
        sizes = {c: fleet.hosts_in(c) for c in fleet.cluster_names()}
    finally:
        fleet.close()
    for name in ("campaign.yaml", "bad-campaign.yaml", "approved-campaign.yaml"):
        plans = plan_campaign(load_campaign_spec(EXAMPLES / name), sizes)
        assert [p.hosts_per_cluster for p in plans][0] == {"c00": 4}, name
        assert sorted(plans[2].clusters) == ["c01", "c02", "c03"], name


def test_train_example_fits_every_preset_cluster(tmp_home: Path) -> None:
    """The train example passes the same checks `train start` makes against a fleet."""
    from orchestrator.app.cli.train import check_spec_against_fleet

    make_fleet(tmp_home, 3600.0)
    assert check_spec_against_fleet(load_train_spec(EXAMPLES / "train.yaml")) == 128


def _hosts(n: int) -> dict[str, tuple[str, str]]:
    return {
        f"c00-z{i // 384:02d}-r{i // 16:03d}-h{i % 16:02d}": (
            "draining",
            f"waits for job {i // 64} to end, by fleet hour {i / 7:.1f} (in 2.0 h)",
        )
        for i in range(n)
    }


def test_details_stay_bounded_at_meta_24k_scale() -> None:
    """A 3,072-host domain, wave or train page stays within the details limit, naming hosts."""
    hosts = _hosts(3072)
    text = domain_details("train-c00-c0-d1", "c00", "draining", {"os": "6.8.0-45"}, hosts)
    assert len(text.encode()) <= DETAILS_LIMIT
    assert "c00-z00-r000-h00" in text and "3,032 more hosts" in text
    p = ClusterProgress(cluster="c00", state="draining", waves_total=48, wave_hosts=3072)
    spec = load_operation_spec(EXAMPLES / "cuda.yaml")
    assert len(cluster_details(spec, "ops-x", p, hosts).encode()) <= DETAILS_LIMIT
    st = OperationStatus(
        operation_id="ops-x",
        kind="cuda-upgrade",
        targets=dict(spec.targets),
        consistency="job",
        clusters={f"c{i:02d}": ClusterProgress(cluster=f"c{i:02d}") for i in range(100)},
    )
    assert "60 more clusters" in operation_details(st)
    train = load_train_spec(EXAMPLES / "train.yaml")
    flying = {f"train-c00-c0-d{i}": list(hosts)[i * 8 : i * 8 + 8] for i in range(300)}
    assert len(train_details(train, TrainState(), flying, 92, 3600.0).encode()) <= DETAILS_LIMIT


def test_text_is_plain_words() -> None:
    """Summaries are one bounded line; planner codes read as sentences; no Python reprs."""
    assert len(one_line("x " * 500)) <= SUMMARY_LIMIT
    assert "evicting one job frees many hosts" in explain_wait(
        "gathering slots for a job worth evicting"
    )
    train = load_train_spec(EXAMPLES / "train.yaml")
    text = train_details(train, TrainState(waiting="budget exhausted"), {}, 92, None)
    assert "{" not in text and "capacity budget is used up" in text


def test_worker_logs_json_lines(dev_env, tmp_path: Path, task_queue: str) -> None:
    """`trainctl worker --log-format json` writes only JSON objects, one a line, on stderr."""
    make_fleet(tmp_path, 3600.0)
    target = dev_env.client.service_client.config.target_host
    args = ["--address", target, "--task-queue", task_queue, "--metrics-port", "0"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from orchestrator.app.cli import entrypoint; entrypoint()",
            "worker",
        ]
        + [*args, "--log-format", "json"],
        cwd=REPO,
        env={**os.environ, "TRAINCTL_HOME": str(tmp_path)},
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "worker started" in line:
                break
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
        lines += rest.splitlines()
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(line) for line in lines if line.strip()]
    assert any(e.get("event") == "worker started" for e in events), lines
    assert all(isinstance(e, dict) and "timestamp" in e for e in events)
