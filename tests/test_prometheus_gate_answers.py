"""The Prometheus gate's look at answers it cannot use: each holds the stage with the reason,
never raises, and never shows the password or its basic-auth token. A small HTTP server on
loopback answers as a broken, slow or misconfigured Prometheus would; the gate sends basic auth
(``username`` and ``password_file``), which the server checks."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.prometheus_query import query_prometheus
from orchestrator.campaign.gate import note_prometheus
from orchestrator.contracts.campaign_types import PromQuery, StageStatus

PASSWORD = "s3cret-GATE-pw-91f0"
TOKEN = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()

_OK = {"status": "success", "data": {"resultType": "vector", "result": []}}
#: What the server answers under /<case>/api/v1/query: (HTTP status, body).
ANSWERS: dict[str, tuple[int, object]] = {
    "list": (200, [1, 2, 3]),
    "not-json": (200, "<html>502 Bad Gateway</html>"),
    "no-result": (200, {"status": "success", "data": [1]}),
    "not-series": (200, {"status": "success", "data": {"resultType": "vector", "result": [1]}}),
    "scalar": (200, {"status": "success", "data": {"resultType": "scalar", "result": [1, "1"]}}),
    "query-error": (200, {"status": "error", "error": "many-to-many matching not allowed"}),
    "http-500": (500, "oops"),
    "bad-query": (400, {"status": "error", "errorType": "bad_data", "error": "parse error"}),
    "echo": (200, {"status": "error", "error": "denied for header Basic {auth}"}),
}
#: The reason each case's answer gives (part of the stage's gate line).
REASONS = {
    "list": "the answer is JSON but not Prometheus's (a list, not an object)",
    "not-json": "the answer is not JSON: <html>502 Bad Gateway</html>",
    "no-result": "the answer has no data.result list",
    "not-series": "the answer's data.result holds something other than series",
    "scalar": "the query answers a scalar, not series",
    "query-error": "many-to-many matching not allowed",
    "http-500": "HTTP 500 Internal Server Error",
    "bad-query": "HTTP 400 Bad Request: parse error",
    "echo": "denied for header Basic ***",
    "silent": "timed out",
    "trickle": "no whole answer within 0.5 s",
}


class _Server(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        case = self.path.split("/")[1]
        auth = self.headers.get("Authorization") or ""
        if auth != f"Basic {TOKEN}":
            self._send(401, "no")
        elif case == "silent":
            time.sleep(3)
        elif case == "trickle":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(30):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
        elif case == "ok":
            self._send(200, {**_OK, "data": {"result": [{"metric": {"alertname": "A"}}]}})
        else:
            status, body = ANSWERS[case]
            self._send(status, json.loads(json.dumps(body).replace("{auth}", auth[6:])))

    def _send(self, status: int, body: object) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_every_unusable_answer_holds_the_stage_with_its_reason_and_no_credentials(
    prometheus: str, tmp_path: Path
) -> None:
    """A wrong-shaped JSON answer, a non-JSON body, an HTTP error, a silent or trickling server
    each hold the stage with a reason naming what was wrong, and no reason shows the password
    or its token; a usable answer still passes or holds on its series."""
    pw_file = tmp_path / "prometheus.pw"
    pw_file.write_text(PASSWORD + "\n")
    for case, reason in REASONS.items():
        query = PromQuery(
            url=f"{prometheus}/{case}", query="ALERTS", username="admin", password_file=str(pw_file)
        )
        answer = query_prometheus(query, timeout=0.5)
        stage = StageStatus(name="canary", state="running", gate="0 failed of at most 1")
        assert not note_prometheus(stage, answer), case
        assert stage.state == "held", case
        assert reason in stage.gate and f"{prometheus}/{case}" in stage.gate, (case, stage.gate)
        assert PASSWORD not in stage.gate and TOKEN not in stage.gate, case
    ok = PromQuery(
        url=f"{prometheus}/ok", query="ALERTS", username="admin", password_file=str(pw_file)
    )
    assert query_prometheus(ok).firing == 1
