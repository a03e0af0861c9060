"""``trainctl demo --campaign``: a good build rolling through every cluster, stage by stage.

Like ``orchestrator.app.demo`` it builds a fresh fleet (preset ``multi``: four clusters of 64 hosts)
under TRAINCTL_HOME, starts the embedded Temporal server with its UI and a worker in this
process, then runs the issue's campaign (os ``6.12.0-9``: a 4-host canary of c00 baking 2 h,
all of c00 baking 4 h, then the other clusters two at a time) through
``orchestrator.campaign.client``, reporting each status to the caller as stages move. The
summary's host counts come from the fleet itself (which hosts run the new kernel, which are
quarantined or in repair), and the fleet's audit, not from the campaign's own word.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from temporalio.client import Client

from orchestrator.app.demo import free_port
from orchestrator.app.temporal_server import DevServer, DevServerConfig
from orchestrator.app.worker import TASK_QUEUE, build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.campaign.client import (
    CampaignNotFound,
    campaign_handle,
    campaign_status,
    final_status,
    start_campaign,
)
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import FINAL_STATES, CampaignStatus
from orchestrator.contracts.models import HostState
from orchestrator.contracts.paths import trainctl_home
from orchestrator.fleet import create_fleet, fleet_path, open_backend
from orchestrator.fleet.presets import get_preset
from orchestrator.infra.client import connect
from orchestrator.infra.connection import ConnectionOptions

#: The issue's campaign (its Prometheus gate left out: the demo runs no Prometheus).
DEMO_CAMPAIGN: dict[str, Any] = {
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


async def run_campaign_demo(
    preset: str,
    speed: float,
    seed: int,
    port: int,
    ui_port: int,
    on_ui: Callable[[str], None] = lambda url: None,
    on_status: Callable[[CampaignStatus], None] = lambda status: None,
) -> dict[str, Any]:
    """Run the campaign demo and return its summary."""
    started = time.monotonic()
    spec = CampaignSpec.model_validate(DEMO_CAMPAIGN)
    path = fleet_path()
    create_fleet(path, get_preset(preset), seed, speed).close()
    db = trainctl_home() / "demo-temporal.db"
    db.unlink(missing_ok=True)
    config = DevServerConfig(port=free_port(port), ui_port=free_port(ui_port), db_filename=db)
    async with DevServer(config) as server:
        client = await connect(options=ConnectionOptions(address=server.address, local=True))
        url = f"{server.ui_url}/namespaces/default/workflows/{spec.workflow_id}"
        on_ui(url)
        async with build_worker(client, path):
            await start_campaign(client, spec, task_queue=TASK_QUEUE)
            status = await _follow_to_end(client, spec.workflow_id, on_status)
    fleet = open_backend(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    return {
        "preset": preset,
        "campaign_id": status.campaign_id,
        "state": status.state,
        "reason": status.reason,
        "stages": [
            {
                "name": s.name,
                "state": s.state,
                "clusters": sorted(s.clusters),
                "hosts_changed": s.hosts_changed,
                "failures": s.failures,
                "failure_limit": s.failure_limit,
            }
            for s in status.stages
        ],
        "hosts_changed": status.hosts_changed,
        "hosts_quarantined": status.hosts_quarantined,
        "hosts_rolled_back": status.hosts_rolled_back,
        "clusters": _on_target(path, spec.targets),
        "audit_ok": report.ok,
        "wall_seconds": round(time.monotonic() - started, 3),
        "fleet": str(path),
        "ui": url,
    }


async def _follow_to_end(
    client: Client, workflow_id: str, on_status: Callable[[CampaignStatus], None]
) -> CampaignStatus:
    """Pass each status of the campaign to ``on_status`` until it ends; its final status."""
    while True:
        await asyncio.sleep(0.5)
        with contextlib.suppress(CampaignNotFound):  # its first task may not have run
            status = await campaign_status(client, workflow_id)
            on_status(status)
            if status.state in FINAL_STATES:
                break
    return await final_status(campaign_handle(client, workflow_id))


def _on_target(path: Any, targets: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per cluster, from the fleet file: in-service hosts on the targets, off them, and down."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT cluster, state, versions FROM hosts").fetchall()
    finally:
        conn.close()
    out: dict[str, dict[str, int]] = {}
    for cluster, state, versions in rows:
        c = out.setdefault(cluster, {"on_target": 0, "off_target": 0, "down": 0})
        have = json.loads(versions)
        if state != HostState.IN_SERVICE:
            c["down"] += 1
        elif all(have.get(k) == v for k, v in targets.items()):
            c["on_target"] += 1
        else:
            c["off_target"] += 1
    return dict(sorted(out.items()))
