"""The Prometheus gate's one look: an instant PromQL query over HTTP, with basic auth when the
spec names a user (the password read here, on the worker, from ``password_file`` or the
environment: it never travels in a workflow input), and an answer that never shows a password
(URLs without their ``user:password@``, tokens replaced).
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from orchestrator.contracts.campaign_types import PromAnswer, PromQuery

#: Where the worker finds the Prometheus gate's password when the spec names no file.
PROMETHEUS_PASSWORD_ENV = "TRAINCTL_PROMETHEUS_PASSWORD"


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


def query_prometheus(req: PromQuery) -> PromAnswer:
    """Run ``req``'s instant query; an answer that cannot be read holds the stage (says why)."""
    url = req.url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": req.query})
    shown = shown_url(req.url)
    secrets: list[str] = []
    try:
        request = urllib.request.Request(url)  # noqa: S310 (the configured URL)
        if req.username is not None:
            password = _password(req) or ""
            secrets = [password] if password else []
            token = base64.b64encode(f"{req.username}:{password}".encode()).decode()
            secrets.append(token)
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310
            body = json.loads(resp.read().decode())
    except (urllib.error.URLError, OSError, ValueError) as err:
        why = str(err)
        for secret in sorted(secrets, key=len, reverse=True):
            why = why.replace(secret, "***")
        return PromAnswer(firing=-1, error=f"prometheus: {shown}: {why}")
    if body.get("status") != "success":
        return PromAnswer(firing=-1, error=f"prometheus: {body.get('error', 'query failed')}")
    result = body.get("data", {}).get("result", [])
    sample = [json.dumps(r.get("metric", {}), sort_keys=True) for r in result[:3]]
    return PromAnswer(firing=len(result), sample=sample)
