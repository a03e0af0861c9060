"""The Temporal UI tells the on-call story: a real Chromium opens the dev server's Web UI.

A train runs on ``small`` at a fleet speed slow enough that its first domain is still draining
(hosts wait for their jobs to end or checkpoint) and a CUDA upgrade waits for the train to hand
the cluster over. Debian's ``/usr/bin/chromium``, driven by playwright (no browser download),
opens the train's, a running domain's and the operation's pages and reads what the UI renders
(the current details are markdown inside frames); a screenshot of each goes to the test's
temporary directory (printed). The dev server here has its Web UI on, unlike ``dev_env``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio
from playwright.async_api import Page, async_playwright
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.arbiter.types import arbiter_workflow_id
from orchestrator.ops import parse_spec_text
from orchestrator.ops.client import start_operation
from orchestrator.paths import temporal_cli_path
from orchestrator.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.train.client import start_train
from orchestrator.worker import build_worker
from tests.train_helpers import make_fleet, spec

CHROMIUM = "/usr/bin/chromium"
#: Half a fleet minute per wall second: a job's wait of an hour holds a domain draining for two
#: minutes, longer than the test looks at it.
SPEED = 30.0
#: How long a page may take to show what it must (the UI polls; a loaded CI machine is slow).
PAGE_WAIT = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(loop_scope="session")
async def ui_env() -> AsyncIterator[tuple[WorkflowEnvironment, str]]:
    """A real dev server with its Web UI on a free port, and the UI's URL."""
    ui_port = _free_port()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=timedelta(seconds=60),
        ui=True,
        ui_port=ui_port,
    )
    try:
        yield env, f"http://127.0.0.1:{ui_port}"
    finally:
        await env.shutdown()


#: The saved queries the README lists for on-call (the cluster one is checked here).
SAVED_QUERIES = {
    "cluster": "TrainCluster = '{cluster}' OR WorkflowId STARTS_WITH 'train-{cluster}-'",
    "campaign": "TrainCampaign = 'campaign-{name}' OR WorkflowId STARTS_WITH 'ops-{name}-'",
    "operation": "TrainCampaign = '{op_id}'",
    "failed": "ExecutionStatus = 'Failed' OR TrainPhase IN ('halted', 'failed')",
    "waiting": (
        "ExecutionStatus = 'Running' AND "
        "TrainPhase IN ('waiting', 'waiting_for_room', 'paused', 'halted')"
    ),
}


async def _ids(client: Client, query: str, expect: set[str]) -> set[str]:
    """Workflow ids a visibility query finds, once it finds ``expect`` (visibility lags)."""
    found: set[str] = set()
    for _ in range(20):
        found = {w.id async for w in client.list_workflows(query)}
        if expect <= found:
            break
        await asyncio.sleep(1)
    return found


async def _running(client: Client, workflow_type: str) -> list[str]:
    query = f"WorkflowType='{workflow_type}' AND ExecutionStatus='Running'"
    return [w.id async for w in client.list_workflows(query)]


async def _draining_domain(client: Client) -> tuple[str, str, str]:
    """A running domain with a host waiting for its job: (domain id, host, its wait)."""
    deadline = time.monotonic() + PAGE_WAIT
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        for wid in await _running(client, "DomainMaintenance"):
            with contextlib.suppress(RPCError):
                phase: dict[str, Any] = await client.get_workflow_handle(wid).query("phase")
                seen[wid] = phase
                for host, text in sorted(phase.get("hosts", {}).items()):
                    if text.startswith("draining: waits for job"):
                        return wid, host, text.removeprefix("draining: ")
        await asyncio.sleep(1)
    raise AssertionError(f"no domain had a host waiting for its job: {seen}")


async def _page_text(page: Page) -> str:
    """Everything the page shows, frames included (details are rendered in frames)."""
    parts = []
    for frame in page.frames:
        with contextlib.suppress(Exception):
            parts.append(await frame.inner_text("body", timeout=2_000))
    return "\n".join(parts)


async def _metadata_url(client: Client, ui: str, workflow_id: str) -> str:
    """The page of a workflow's User Metadata tab: its summary and current details."""
    run_id = (await client.get_workflow_handle(workflow_id).describe()).run_id
    return f"{ui}/namespaces/{client.namespace}/workflows/{workflow_id}/{run_id}/user-metadata"


async def _open(page: Page, url: str, must_show: list[str], shot: Path) -> str:
    """Open ``url`` until every pattern of ``must_show`` is on it; screenshot; its text.

    The UI is a single-page app that takes seconds to render on a loaded machine and fetches
    the current details by a query to the worker: look every second, reload every 15 s.
    """
    deadline = time.monotonic() + PAGE_WAIT
    text, missing = "", must_show
    await page.goto(url)
    loaded = time.monotonic()
    while missing:
        if time.monotonic() > deadline:
            await page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"{url} never showed {missing}; it showed:\n{text[:4000]}")
        if time.monotonic() - loaded > 15:
            await page.reload()
            loaded = time.monotonic()
        await page.wait_for_timeout(1_000)
        text = await _page_text(page)
        missing = [p for p in must_show if not re.search(p, text)]
    await page.wait_for_timeout(500)  # let the last frame paint before the screenshot
    await page.screenshot(path=str(shot), full_page=True)
    return text


async def test_the_ui_shows_progress_and_per_host_waits(ui_env, tmp_path, task_queue):
    """The train, a draining domain and a waiting operation each tell on-call what they do."""
    env, ui = ui_env
    path = make_fleet(tmp_path, SPEED)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"screenshots in {shots}")
    cuda = {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "c00"},
        "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
        "budget": {"max_unavailable": "10%"},
        "request_id": f"ui-{uuid.uuid4().hex[:6]}",
    }
    op = parse_spec_text(json.dumps(cuda))
    async with build_worker(env.client, path, task_queue):
        train = await start_train(
            # rolling-serial takes hosts in name order, jobs or not: the first domain drains.
            env.client,
            spec(budget={"max_unavailable": "10%"}, policy="rolling-serial"),
            task_queue=task_queue,
        )
        try:
            domain, host, wait = await _draining_domain(env.client)
            started = await start_operation(env.client, op, clusters=["c00"], task_queue=task_queue)
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
                )
                page = await browser.new_page(viewport={"width": 1400, "height": 1600})
                await _open(
                    page,
                    await _metadata_url(env.client, ui, train.id),
                    [r"Running.*cycle 1 of c00", r"\d+ of 128 hosts visited", r"ETA", r"Budget"],
                    shots / "train.png",
                )
                await _open(
                    page,
                    await _metadata_url(env.client, ui, domain),
                    [
                        re.escape(host),
                        r"waits for job \d+ to (end|checkpoint|be evicted)",
                        r"draining",
                    ],
                    shots / "domain.png",
                )
                await _open(
                    page,
                    await _metadata_url(env.client, ui, f"{started.operation_id}-c00"),
                    [r"\d+/\d+ waves done", r"(Waiting for: train-c00|Wave 1)"],
                    shots / "operation-c00.png",
                )
                await _open(
                    page,
                    await _metadata_url(env.client, ui, started.operation_id),
                    [r"waves done over 1 cluster", r"cuda-upgrade to cuda 12\.6", r"c00"],
                    shots / "operation.png",
                )
                await browser.close()
            print(f"domain {domain}: {host} {wait}")
            # The README's saved queries find what on-call looks for.
            op_id = started.operation_id
            expect = {train.id, domain, f"{op_id}-c00"}
            query = SAVED_QUERIES["cluster"].format(cluster="c00")
            assert expect <= await _ids(env.client, query, expect)
            expect = {op_id, f"{op_id}-c00"}
            query = SAVED_QUERIES["operation"].format(op_id=op_id)
            assert await _ids(env.client, query, expect) == expect
            for q in (
                SAVED_QUERIES["waiting"],
                SAVED_QUERIES["failed"],
                SAVED_QUERIES["campaign"].format(name="x"),
            ):
                await _ids(env.client, q, set())  # the server accepts it
        finally:
            for wid in (op.operation_id, f"{op.operation_id}-c00", train.id):
                with contextlib.suppress(RPCError):
                    await env.client.get_workflow_handle(wid).terminate("test done")
            for wid in await _running(env.client, "DomainMaintenance"):
                with contextlib.suppress(RPCError):
                    await env.client.get_workflow_handle(wid).terminate("test done")
            with contextlib.suppress(RPCError):
                await env.client.get_workflow_handle(
                    arbiter_workflow_id("c00", task_queue)
                ).terminate("test done")
    for name in ("train", "domain", "operation-c00", "operation"):
        assert (shots / f"{name}.png").stat().st_size > 10_000
