"""A campaign's Prometheus gate behind basic auth, end to end (issue 24, item 2).

The gate names ``username`` and ``password_file``; the worker's activity reads the file and sends
basic auth to a Prometheus that answers only with those credentials (here a small HTTP server
that fires one alert until told to stop). The stage is held while it fires and passes once it
clears; the password appears nowhere: not in the campaign's status, not in the workflow's
history (its inputs and every activity's), not in the CLI's output, not in the logs. A look
that cannot be used (an answer of the wrong shape, the look's activity failing) holds the stage
with the reason instead of failing the campaign.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities import build_activities
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
from orchestrator.contracts.campaign_types import PromAnswer, PromQuery
from tests.log_helpers import worker_logs
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)
from workflows import WORKFLOWS

pytestmark = pytest.mark.asyncio(loop_scope="session")

PASSWORD = "HUNTER2-gate-pw-7c41"
TOKEN = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()


class _Prometheus(http.server.BaseHTTPRequestHandler):
    firing = True
    authorized = 0
    refused = 0
    #: An answer to give instead of Prometheus's (while set): valid JSON of the wrong shape.
    wrong: object | None = None

    def do_GET(self) -> None:  # noqa: N802
        cls = type(self)
        if self.headers.get("Authorization") != f"Basic {TOKEN}":
            cls.refused += 1
            self.send_response(401)
            self.end_headers()
            return
        cls.authorized += 1
        result = [{"metric": {"alertname": "GateTest"}}] if cls.firing else []
        answer = {"status": "success", "data": {"result": result}}
        data = json.dumps(answer if cls.wrong is None else cls.wrong).encode()
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
        _Prometheus.wrong = None


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


async def test_a_wrong_shaped_answer_holds_the_stage_and_no_log_shows_the_password(
    dev_env: Any, tmp_home: Path, task_queue: str
) -> None:
    """A Prometheus behind basic auth answering valid JSON of the wrong shape (``[1,2,3]``)
    holds the campaign's stage with the reason, and the campaign succeeds once the answer is
    right again; the worker's log, in text and in JSON, holds neither the password nor its
    Base64 token."""
    path = multi_fleet(tmp_home)
    pw_file = tmp_home / "prometheus.pw"
    pw_file.write_text(PASSWORD + "\n")
    _Prometheus.firing, _Prometheus.authorized, _Prometheus.refused = False, 0, 0
    _Prometheus.wrong = [1, 2, 3]
    gate = {"query": "ALERTS", "every": "1s", "username": "admin", "password_file": str(pw_file)}
    with prometheus() as url, worker_logs() as logs:
        spec = CampaignSpec.model_validate(
            {
                "name": f"gated-shape-{task_queue[-8:]}",
                "targets": {"os": "6.12.0-9"},
                "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 2}],
                "gates": {"prometheus": {"url": url, **gate}},
            }
        )
        async with build_worker(dev_env.client, path, task_queue):
            await start_campaign(dev_env.client, spec, task_queue=task_queue)
            status = None
            for _ in range(240):
                await asyncio.sleep(0.5)
                with contextlib.suppress(CampaignNotFound):
                    status = await campaign_status(dev_env.client, spec.workflow_id)
                    if status.state != "running":
                        break
            assert status is not None and status.state == "held", status
            assert "not Prometheus's (a list, not an object)" in status.stages[0].gate
            assert status.stages[0].state == "held", status.stages[0]
            _Prometheus.wrong = None
            handle = campaign_handle(dev_env.client, spec.workflow_id)
            final = await asyncio.wait_for(final_status(handle), 120)
    assert final.state == "succeeded", final.reason
    assert _Prometheus.authorized >= 2 and _Prometheus.refused == 0
    assert "cycle 0 complete" in logs.text and logs.records()  # the worker did log
    for where, text in (("text", logs.text), ("json", logs.json_text)):
        assert PASSWORD not in text and TOKEN not in text, where


#: Whether the stand-in look below fails (it answers nothing once this is False).
_LOOK_FAILS = {"now": True}


@activity.defn(name="campaign_prometheus")
async def failing_look(req: PromQuery) -> PromAnswer:
    """The gate's look, failing as an activity (as a timeout or a lost worker would) until
    told otherwise, then answering nothing."""
    if _LOOK_FAILS["now"]:
        raise ApplicationError("the look crashed\nwith a second line", non_retryable=True)
    return PromAnswer()


async def test_a_failed_look_holds_the_stage_with_the_reason(
    dev_env: Any, tmp_home: Path, task_queue: str
) -> None:
    """The gate's activity failing holds the campaign's stage with the failure's first line as
    the reason (the campaign does not fail), and the campaign succeeds once the look works."""
    path = multi_fleet(tmp_home)
    _LOOK_FAILS["now"] = True
    spec = CampaignSpec.model_validate(
        {
            "name": f"gated-crash-{task_queue[-8:]}",
            "targets": {"os": "6.12.0-9"},
            "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 2}],
            "gates": {"prometheus": {"url": "http://127.0.0.1:9", "query": "up", "every": "1s"}},
        }
    )
    acts = build_activities(path, dev_env.client, task_queue)
    acts = [a for a in acts if getattr(a, "__name__", "") != "prometheus"] + [failing_look]
    with ThreadPoolExecutor(max_workers=8) as pool:
        async with Worker(
            dev_env.client,
            task_queue=task_queue,
            workflows=WORKFLOWS,
            activities=acts,
            activity_executor=pool,
        ):
            await start_campaign(dev_env.client, spec, task_queue=task_queue)
            status = None
            for _ in range(240):
                await asyncio.sleep(0.5)
                with contextlib.suppress(CampaignNotFound):
                    status = await campaign_status(dev_env.client, spec.workflow_id)
                    if status.state != "running":
                        break
            assert status is not None and status.state == "held", status
            gate = status.stages[0].gate
            assert "prometheus: the look failed: the look crashed" in gate, gate
            assert "second line" not in gate
            _LOOK_FAILS["now"] = False
            handle = campaign_handle(dev_env.client, spec.workflow_id)
            final = await asyncio.wait_for(final_status(handle), 120)
    assert final.state == "succeeded", final.reason
