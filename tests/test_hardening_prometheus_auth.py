"""A campaign's Prometheus gate behind basic auth, end to end (issue 24, item 2).

The gate names ``username`` and ``password_file``; the worker's activity reads the file and sends
basic auth to a Prometheus that answers only with those credentials (here a small HTTP server
that fires one alert until told to stop). The stage is held while it fires and passes once it
clears; the password appears nowhere: not in the campaign's status, not in the workflow's
history (its inputs and every activity's), not in the CLI's output, not in the logs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.server
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import (
    CampaignNotFound,
    campaign_handle,
    campaign_status,
    final_status,
    start_campaign,
)
from orchestrator.contracts.campaign_spec import CampaignSpec
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)

pytestmark = pytest.mark.asyncio(loop_scope="session")

PASSWORD = "HUNTER2-gate-pw-7c41"
TOKEN = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()


class _Prometheus(http.server.BaseHTTPRequestHandler):
    firing = True
    authorized = 0
    refused = 0

    def do_GET(self) -> None:  # noqa: N802
        cls = type(self)
        if self.headers.get("Authorization") != f"Basic {TOKEN}":
            cls.refused += 1
            self.send_response(401)
            self.end_headers()
            return
        cls.authorized += 1
        result = [{"metric": {"alertname": "GateTest"}}] if cls.firing else []
        data = json.dumps({"status": "success", "data": {"result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def readable(history_json: str) -> str:
    """The history's JSON with every payload's data decoded (payloads are base64 in it)."""
    out = [history_json]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    with contextlib.suppress(ValueError):
                        out.append(base64.b64decode(value).decode("utf-8", "replace"))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(history_json))
    return "\n".join(out)


@contextlib.contextmanager
def prometheus() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


async def test_gate_behind_basic_auth_never_shows_the_password(
    dev_env: Any, tmp_home: Path, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    path = multi_fleet(tmp_home)
    pw_file = tmp_home / "prometheus.pw"
    pw_file.write_text(PASSWORD + "\n")
    _Prometheus.firing, _Prometheus.authorized, _Prometheus.refused = True, 0, 0
    with prometheus() as url:
        spec = CampaignSpec.model_validate(
            {
                "name": "gated-auth",
                "targets": {"os": "6.12.0-9"},
                "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 2}],
                "gates": {
                    "prometheus": {
                        "url": url,
                        "query": "ALERTS",
                        "every": "1s",
                        "username": "admin",
                        "password_file": str(pw_file),
                    }
                },
            }
        )
        async with build_worker(dev_env.client, path, task_queue):
            await start_campaign(dev_env.client, spec, task_queue=task_queue)
            status = None
            for _ in range(240):
                await asyncio.sleep(0.5)
                with contextlib.suppress(CampaignNotFound):
                    status = await campaign_status(dev_env.client, spec.workflow_id)
                    if status.state == "held":
                        break
            assert status is not None and status.state == "held", status
            assert "GateTest" in status.stages[0].gate, status.stages[0].gate
            assert _Prometheus.authorized >= 1 and _Prometheus.refused == 0
            address = dev_env.client.service_client.config.target_host
            cli = await asyncio.to_thread(
                CliRunner().invoke,
                main,
                ["campaign", "status", "--id", spec.workflow_id, "--address", address, "--json"],
            )
            assert cli.exit_code == 0, cli.output
            _Prometheus.firing = False
            handle = campaign_handle(dev_env.client, spec.workflow_id)
            final = await asyncio.wait_for(final_status(handle), 120)
            history = readable((await handle.fetch_history()).to_json())
    assert final.state == "succeeded", final.reason
    assert str(pw_file) in history  # the path travels; the password does not
    texts = {
        "history": history,
        "status": status.model_dump_json(),
        "final": final.model_dump_json(),
        "cli": cli.output,
        "logs": caplog.text,
    }
    for where, text in texts.items():
        assert PASSWORD not in text and TOKEN not in text, where
