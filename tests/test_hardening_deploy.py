"""/metrics binds where it is told, loopback by default (issue 10, item 10).

The worker's /metrics used to bind 0.0.0.0 while the Temporal server binds 127.0.0.1. Now it is a
setting (``--metrics-host``), loopback unless told otherwise, and docker-compose.yml, where
Prometheus scrapes from another container, says 0.0.0.0 explicitly.
"""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import yaml
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.demo import free_port
from orchestrator.telemetry.metrics import DEFAULT_METRICS_HOST, serve_metrics
from tests.train_helpers import make_fleet

ROOT = Path(__file__).resolve().parent.parent


def reachable(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=2).close()
    except OSError:
        return False
    return True


def test_metrics_bind_loopback_by_default_and_all_addresses_when_told(tmp_home: Path) -> None:
    """Default: only 127.0.0.1 answers (127.0.0.2, another loopback address, does not);
    host 0.0.0.0: both do. The body carries the fleet's gauges either way."""
    path = make_fleet(tmp_home, 3600.0)
    assert DEFAULT_METRICS_HOST == "127.0.0.1"
    port = free_port(0)
    server = serve_metrics(port, path)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert 'trainctl_hosts{cluster="c00",state="in_service"} 128.0' in r.read().decode()
        assert not reachable("127.0.0.2", port)
    finally:
        server.shutdown()
        server.server_close()
    port = free_port(0)
    server = serve_metrics(port, path, "0.0.0.0")
    try:
        assert reachable("127.0.0.1", port) and reachable("127.0.0.2", port)
    finally:
        server.shutdown()
        server.server_close()


def test_worker_names_a_metrics_address_it_cannot_bind(tmp_home: Path) -> None:
    """A foreign address is one line naming metrics_host (the host is what is wrong: issue
    24, 8), exit 1, no traceback."""
    make_fleet(tmp_home, 3600.0)
    args = ["worker", "--metrics-host", "192.0.2.1", "--metrics-port", str(free_port(0))]
    result = CliRunner().invoke(main, [*args, "--address", "127.0.0.1:1", "--json"])
    assert result.exit_code == 1, result.output
    assert '"field": "metrics_host"' in result.stdout and "192.0.2.1" in result.stdout


def test_compose_workers_expose_metrics_to_prometheus() -> None:
    """In docker-compose the workers bind /metrics on 0.0.0.0, at the port Prometheus scrapes."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = [str(c) for c in compose["services"]["worker"]["command"]]
    assert command[command.index("--metrics-host") + 1] == "0.0.0.0"
    port = command[command.index("--metrics-port") + 1]
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = [
        t
        for job in prometheus["scrape_configs"]
        for s in job["static_configs"]
        for t in s["targets"]
    ]
    assert f"worker:{port}" in targets
