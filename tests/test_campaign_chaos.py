"""Chaos on the campaign path: a bad build riding trains on every cluster of ``multi`` survives
a SIGKILLed worker during its bake and again during its rollback (issue 23).

Everything is real and in its own process, as in ``test_chaos``: `trainctl server` (file-backed
dev server), `trainctl worker`, the CLI for every start and status, the SQLite fleet at 1 fleet
hour per wall second. The README's train runs on each of c00..c03 when the campaign starts. The
kernel breaks hosts on c01 only (the injected fault), so its canary on c00 passes and bakes; the
worker is killed during that bake, the next stage (all of c01) fails on the kernel, and the
worker is killed again while the campaign rolls back, each time restarted a moment later. The
campaign must end ``rolled_back`` with the kernel blamed, no host in service on it, and the
audit clean.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from orchestrator.app.demo import free_port
from tests.test_campaign_e2e import hosts
from tests.test_chaos import cli, stop_all, worker_up
from tests.test_hardening_server import ready, start_server
from tests.train_helpers import make_fleet

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEED = 3600.0
BAD = "6.12.0-bad"


def _campaign(env: dict[str, str], campaign: str) -> dict[str, Any]:
    code, out = cli(env, "campaign", "status", "--id", campaign)
    return out if code == 0 else {}


def _wait_for(env: dict[str, str], campaign: str, done: Any, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    out: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = _campaign(env, campaign)
        if out and done(out):
            return out
        time.sleep(0.3)
    raise AssertionError(f"campaign never got there: {out}")


def test_bad_campaign_over_running_trains_survives_worker_kills(tmp_home: Path) -> None:
    port = free_port(0)
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_home), "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"}
    path = make_fleet(tmp_home, SPEED, preset="multi")
    readme_train = yaml.safe_load((EXAMPLES / "train.yaml").read_text())
    spec = yaml.safe_load((EXAMPLES / "bad-campaign.yaml").read_text())
    spec["stages"] = [
        {"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "12h"},
        {"name": "second", "clusters": ["c01"], "bake": "0h"},
    ]
    campaign = spec["name"]
    spec_file = tmp_home / "campaign.json"
    spec_file.write_text(json.dumps(spec))
    worker_log = tmp_home / "worker.log"
    server = start_server(tmp_home, port)
    worker: subprocess.Popen[bytes] | None = None
    kills: list[str] = []
    try:
        ready(server)
        worker = worker_up(env, worker_log)
        fault = ("--cluster", "c01", "--component", "os", "--version", BAD, "--rate", "1.0")
        assert cli(env, "fleet", "inject-fault", *fault)[0] == 0
        for cluster in ("c00", "c01", "c02", "c03"):
            train_file = tmp_home / f"train-{cluster}.json"
            train_file.write_text(json.dumps({**readme_train, "cluster": cluster}))
            code, out = cli(env, "train", "start", "--spec", str(train_file))
            assert code == 0, out
        code, out = cli(env, "campaign", "start", "--spec", str(spec_file))
        assert code == 0, out

        def kill_and_restart(why: str) -> None:
            nonlocal worker
            assert worker is not None and worker.poll() is None, worker_log.read_text()[-3000:]
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            kills.append(why)
            time.sleep(0.5)
            worker = worker_up(env, worker_log)

        # During the canary's bake (its four hosts on the kernel, passing on c00).
        _wait_for(env, campaign, lambda o: o["stages"][0]["state"] == "baking", timeout=240)
        kill_and_restart("bake")
        status = _wait_for(
            env, campaign, lambda o: o["state"] in ("rolling_back", "rolled_back", "failed"), 240
        )
        if status["state"] == "rolling_back":
            kill_and_restart("rollback")
        final = _wait_for(
            env, campaign, lambda o: o["state"] in ("rolled_back", "failed", "aborted"), 300
        )
        for cluster in ("c00", "c01", "c02", "c03"):
            cli(env, "train", "stop", "--cluster", cluster, "--reason", "chaos done")
        for cluster in ("c00", "c01", "c02", "c03"):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                code, out = cli(env, "train", "status", "--cluster", cluster)
                if code == 0 and out["state"] == "stopped":
                    break
                time.sleep(0.5)
        code, audit = cli(env, "audit")
    finally:
        stop_all(worker, server)
    assert kills == ["bake", "rollback"], kills
    assert final["stages"][0]["state"] == "passed" and final["stages"][1]["state"] == "failed"
    assert final["state"] == "rolled_back", (kills, final.get("reason"))
    top = final["blame"][0]
    assert (top["component"], top["version"]) == ("os", BAD), final["blame"]
    assert not [r[0] for r in hosts(path) if r[2] == "in_service" and r[3]["os"] == BAD]
    assert code == 0 and audit["ok"], (kills, audit)
