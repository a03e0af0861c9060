"""The Prometheus gate's one look: an instant PromQL query over HTTP, with basic auth when the
spec names a user (the password read here, on the worker, from ``password_file`` or the
environment: it never travels in a workflow input), and an answer that never shows a password
(URLs without their ``user:password@``, tokens replaced).

Every way the look can go wrong (Prometheus not reachable, an HTTP error, no answer within
``QUERY_TIMEOUT``, a body that is not JSON or not an instant vector's answer) is an answer
that holds the stage and says why, never an exception: an exception would fail the activity,
then the campaign, and its traceback is where a password could reach a log. The password and
its Base64 token are also handed to the log's scrubber (``remember_secrets``) before use.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from orchestrator.contracts.campaign_types import PromAnswer, PromQuery
from orchestrator.infra.connection import redact, remember_secrets

#: Where the worker finds the Prometheus gate's password when the spec names no file.
PROMETHEUS_PASSWORD_ENV = "TRAINCTL_PROMETHEUS_PASSWORD"
#: Seconds one look may take, connection and whole body: half the activity's start-to-close
#: timeout (``PROM_OPTIONS``), so a silent Prometheus is an answer that holds, not a timeout.
QUERY_TIMEOUT = 10.0
#: The largest answer read (a gate's query answers a few series; more is not a gate query).
MAX_ANSWER_BYTES = 8 * 1024 * 1024
#: How much of a text from Prometheus (an error, a body) a reason quotes.
QUOTED_CHARS = 300
#: Shorter passwords are not scrubbed from logs: replacing every "ab" would garble each line.
_SCRUBBED_LENGTH = 4


def shown_url(url: str) -> str:
    """``url`` as it may be shown: without any ``user:password@`` part."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<the gate's URL>"
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _password(req: PromQuery) -> str | None:
    """The gate's password, read here on the worker (it never travels in a workflow input)."""
    if req.password_file:
        return Path(req.password_file).read_text(encoding="utf-8").strip("\r\n")
    return os.environ.get(PROMETHEUS_PASSWORD_ENV) or None


def _request(req: PromQuery) -> tuple[urllib.request.Request, list[str]]:
    """The query's HTTP request, and the secrets it carries (to keep out of any text)."""
    url = req.url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": req.query})
    request = urllib.request.Request(url)  # noqa: S310 (the configured URL)
    if req.username is None:
        return request, []
    password = _password(req) or ""
    token = base64.b64encode(f"{req.username}:{password}".encode()).decode()
    secrets = [s for s in (password, token) if s]
    remember_secrets(s for s in secrets if len(s) >= _SCRUBBED_LENGTH)
    request.add_header("Authorization", f"Basic {token}")
    return request, secrets


def _read(request: urllib.request.Request, timeout: float) -> bytes:
    """The answer's body, read within ``timeout`` seconds in all (a body trickling in is cut
    off at the deadline, not waited for chunk by chunk) and at most ``MAX_ANSWER_BYTES``."""
    deadline = time.monotonic() + timeout
    body = bytearray()
    with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310
        while chunk := resp.read1(64 * 1024):
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                raise ValueError(f"an answer over {MAX_ANSWER_BYTES // 2**20} MiB")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no whole answer within {timeout:g} s")
    return bytes(body)


def _http_error(err: urllib.error.HTTPError) -> str:
    """An HTTP error as a reason: the status, and Prometheus's own ``error`` when the body
    carries one (a query it cannot parse answers 400 with the parser's message)."""
    why = f"HTTP {err.code} {err.reason}"
    try:
        body = json.loads(err.read(64 * 1024).decode())
    except (OSError, ValueError, http.client.HTTPException):
        return why
    if isinstance(body, dict) and body.get("error"):
        why += f": {_quoted(body['error'])}"
    return why


def _quoted(value: object) -> str:
    """``value`` as one line of at most ``QUOTED_CHARS``: a reason fits the stage's gate line."""
    text = " ".join(str(value).split())
    return text if len(text) <= QUOTED_CHARS else text[: QUOTED_CHARS - 3] + "..."


def _series(body: object) -> list[dict[str, object]] | str:
    """The series of an instant query's answer, or why ``body`` is not one."""
    if not isinstance(body, dict):
        return f"the answer is JSON but not Prometheus's (a {type(body).__name__}, not an object)"
    if body.get("status") != "success":
        return _quoted(body.get("error") or f"the query failed (status {body.get('status')!r})")
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        return "the answer has no data.result list"
    kind = data.get("resultType", "vector")
    if kind not in ("vector", "matrix"):
        return f"the query answers a {_quoted(kind)}, not series (write a query for series)"
    result: list[object] = data["result"]
    if not all(isinstance(r, dict) for r in result):
        return "the answer's data.result holds something other than series"
    return [r for r in result if isinstance(r, dict)]


def query_prometheus(req: PromQuery, timeout: float = QUERY_TIMEOUT) -> PromAnswer:
    """Run ``req``'s instant query: the series it answers, or (``firing`` -1) why the answer
    cannot be read, which holds the stage; never raises and never shows a secret."""
    shown = shown_url(req.url)
    secrets: list[str] = []

    def held(why: str) -> PromAnswer:
        return PromAnswer(firing=-1, error=redact(f"prometheus: {shown}: {why}", secrets))

    try:
        request, secrets = _request(req)
        raw = _read(request, timeout)
    except urllib.error.HTTPError as err:
        return held(_http_error(err))
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as err:
        return held(_quoted(err) or type(err).__name__)
    try:
        body = json.loads(raw.decode())
    except ValueError:
        return held(f"the answer is not JSON: {_quoted(raw[:80].decode('utf-8', 'replace'))}")
    series = _series(body)
    if isinstance(series, str):
        return held(series)
    sample = [json.dumps(r.get("metric", {}), sort_keys=True) for r in series[:3]]
    return PromAnswer(firing=len(series), sample=[redact(s, secrets) for s in sample])
