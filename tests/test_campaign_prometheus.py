"""A campaign's Prometheus gate against a real Prometheus server scraping the worker's /metrics.

The server is Debian's ``prometheus`` (``scripts/test`` installs it), loading the project's own
``deploy/alerts.yml``; the gate asks for the shipped ``ClusterQuarantinesHigh`` alert. While
more than 5% of a cluster's hosts are quarantined the alert fires and the campaign's stage is
held (state ``held``, the query named in the reason); once the hosts are back it passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import sqlite3
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import (
    CampaignNotFound,
    campaign_handle,
    campaign_status,
    final_status,
    start_campaign,
)
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.telemetry.metrics import serve_metrics
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO = Path(__file__).resolve().parent.parent
QUERY = 'ALERTS{alertname="ClusterQuarantinesHigh", alertstate="firing"}'
#: Hosts of c01 an operator has quarantined (4 of 64: over the alert's 5%).
HELD_HOSTS = ("c01-z00-r000-h00", "c01-z00-r000-h01", "c01-z00-r000-h02", "c01-z00-r000-h03")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def prometheus(tmp: Path, metrics_port: int) -> Iterator[str]:
    """A real Prometheus scraping ``metrics_port`` every second, with the shipped rules."""
    binary = shutil.which("prometheus")
    assert binary, "scripts/test installs Debian's prometheus package"
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{REPO / 'deploy' / 'alerts.yml'}']\n"
        "scrape_configs:\n"
        f"  - job_name: trainctl\n    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def set_state(path: Path, hosts: tuple[str, ...], state: str, reason: str) -> None:
    """An operator's change to these hosts (out of band of any campaign)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executemany(
                "UPDATE hosts SET state = ?, reason = ? WHERE name = ?",
                [(state, reason, h) for h in hosts],
            )
    finally:
        conn.close()


async def ready(url: str) -> None:
    for _ in range(120):
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp,
        ):
            if resp.status == 200:
                return
        await asyncio.sleep(0.5)
    raise AssertionError("prometheus did not become ready")


async def scraped(url: str, promql: str) -> None:
    """Wait until Prometheus answers ``promql`` with something (it scrapes every second)."""
    query = urllib.parse.urlencode({"query": promql})
    for _ in range(240):
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as resp:
            if json.loads(resp.read())["data"]["result"]:
                return
        await asyncio.sleep(0.5)
    raise AssertionError(f"Prometheus never answered {promql}")


async def firing(url: str) -> None:
    await scraped(url, QUERY)


async def test_firing_alert_holds_the_stage_until_it_clears(dev_env, tmp_home, task_queue):
    """While ClusterQuarantinesHigh fires the canary is held; once it clears the campaign ends."""
    path = multi_fleet(tmp_home)
    set_state(path, HELD_HOSTS, "quarantined", "operator: suspect PSU")
    port = free_port()
    server = serve_metrics(port, path)
    try:
        with prometheus(tmp_home, port) as url:
            await ready(url)
            await firing(url)  # the precondition: Prometheus itself sees the alert fire
            spec = CampaignSpec.model_validate(
                {
                    "name": "gated",
                    "targets": {"os": "6.12.0-9"},
                    "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 2}],
                    "gates": {"prometheus": {"url": url, "query": QUERY, "every": "1s"}},
                }
            )
            async with build_worker(dev_env.client, path, task_queue):
                await start_campaign(dev_env.client, spec, task_queue=task_queue)
                for _ in range(240):
                    await asyncio.sleep(0.5)
                    with contextlib.suppress(CampaignNotFound):  # before its first task
                        status = await campaign_status(dev_env.client, spec.workflow_id)
                        if status.state == "held":
                            break
                assert status.state == "held", status
                assert status.stages[0].state == "held"
                assert "ClusterQuarantinesHigh" in status.stages[0].gate
                assert status.stages[0].hosts_changed == 2  # the canary itself is done
                await scraped(url, 'trainctl_campaign_state{campaign="gated",state="held"} == 1')
                set_state(path, HELD_HOSTS, "in_service", "operator: PSU replaced")
                final = await asyncio.wait_for(
                    final_status(campaign_handle(dev_env.client, spec.workflow_id)), 120
                )
    finally:
        server.shutdown()
    assert final.state == "succeeded", final.reason
    assert final.stages[0].state == "passed"
