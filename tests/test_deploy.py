"""The deployment files are valid, and a running worker's /metrics is what Prometheus expects."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from orchestrator.app.demo import free_port
from tests.train_helpers import make_fleet

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_prometheus_config_and_rules_pass_promtool():
    """promtool accepts the shipped scrape config and alert rules."""
    assert shutil.which("promtool"), ".ci/run installs Debian's prometheus package"
    out = _run("promtool", "check", "config", "deploy/prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


def test_compose_file_validates():
    """docker-compose parses the production stack (it cannot run without a Docker engine here)."""
    assert shutil.which("docker-compose"), ".ci/run installs Debian's docker-compose package"
    out = _run("docker-compose", "config", "-q")
    assert out.returncode == 0, out.stderr


async def test_worker_metrics_pass_promtool(dev_env, tmp_home, task_queue):
    """A real worker serves trainctl_ metrics of the fleet that promtool finds well-formed."""
    make_fleet(tmp_home, 3600.0)
    port = free_port(0)
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_home)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from orchestrator.app.cli import entrypoint; entrypoint()",
            "worker",
            "--metrics-port",
            str(port),
            "--task-queue",
            task_queue,
            "--address",
            dev_env.client.service_client.config.target_host,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        body = ""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        assert 'trainctl_hosts{cluster="c00",state="in_service"} 128.0' in body
        assert "trainctl_hosts_out_of_service" in body
        assert "# TYPE trainctl_operation_state gauge" in body  # the operations' watch (issue 25)
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=body, text=True, capture_output=True, timeout=30
        )
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        proc.terminate()
        assert proc.wait(timeout=40) == 0, "worker did not stop gracefully on SIGTERM"
