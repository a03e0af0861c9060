"""The worker's log in both formats (console text, JSON lines): an activity attempt that failed
with a temporary error is one line (kind, attempt, seconds to the next attempt, the error's
first line), a traceback never shows a frame's local variables, and a workflow logging an
exception inside the Temporal sandbox gets its traceback written. The real Temporal dev server
(it tells activities their retry policy), and a real PostgreSQL restarting under a worker."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orchestrator.app.cli import main
from orchestrator.fleet.store_url import STORE_ENV
from tests.log_helpers import Logs, worker_logs
from tests.log_hygiene_flow import LOCAL_SECRET, Flow, flaky
from tests.pg_helpers import PgServer

#: A local's name and value as a traceback that shows locals writes them (rich or the JSON
#: transformer: ``name = 'value'`` or ``"name": "'value'"``).
_LOCALS = re.compile(r"locals|kept\s*[=:]")


async def _run_flow(env: WorkflowEnvironment, task_queue: str, retries: bool) -> Logs:
    key = f"flow-{uuid.uuid4().hex[:8]}"
    with worker_logs() as logs:
        async with Worker(env.client, task_queue=task_queue, workflows=[Flow], activities=[flaky]):
            result = await env.client.execute_workflow(
                Flow.run, args=[key, retries], id=key, task_queue=task_queue
            )
    assert result == LOCAL_SECRET[:4] * (2 if retries else 1)
    return logs


def _no_locals(logs: Logs) -> None:
    for where, text in (("text", logs.text), ("json", logs.json_text)):
        assert LOCAL_SECRET not in text, where
        assert not _LOCALS.search(text), (where, _LOCALS.search(text))


async def test_a_workflow_logging_an_exception_in_the_sandbox_writes_its_traceback_without_locals(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    """An exception a workflow logs inside the sandbox is written in both formats, as a plain
    traceback (text) or an exception dict (JSON), with none of the frame's local variables."""
    logs = await _run_flow(dev_env, task_queue, retries=False)
    text = [ln for ln in logs.text.splitlines() if "the workflow logs an exception" in ln]
    # once, or again if a loaded worker's workflow task timed out and ran a second time
    assert text, logs.text[-3000:]
    after = logs.text.split(text[0], 1)[1]
    assert "Traceback (most recent call last)" in after
    assert "ValueError: boom inside the sandbox" in after
    assert "RestrictedWorkflowAccessError" not in logs.text
    recs = [r for r in logs.records() if "the workflow logs an exception" in r["event"]]
    assert recs and all(r["exception"][0]["exc_value"] == "boom inside the sandbox" for r in recs)
    _no_locals(logs)


async def test_a_retried_temporary_error_is_one_line_and_no_traceback_shows_locals(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Each attempt that failed with a temporary error is one line in both formats (kind,
    attempt, seconds to the next attempt, the error's first line), while a bug's attempt keeps
    its traceback; no line shows a frame's local variables."""
    logs = await _run_flow(dev_env, task_queue, retries=True)
    lines = [ln for ln in logs.text.splitlines() if "BackendAsleep" in ln]
    assert len(lines) == 2, logs.text[-3000:]
    for attempt, line in zip((2, 3), lines, strict=True):
        assert "activity attempt failed; retrying" in line
        assert f"attempt={attempt}" in line and f"next_retry_s={0.25 * 2 ** (attempt - 1)}" in line
        assert f"backend asleep (attempt {attempt})" in line
    assert "second line of the message" not in logs.text
    assert logs.text.count("Traceback (most recent call last)") == 2  # the bug, the sandbox's
    assert "ValueError: a bug on attempt 1" in logs.text
    records = [r for r in logs.records() if r.get("kind") == "BackendAsleep"]
    assert [(r["attempt"], r["next_retry_s"]) for r in records] == [(2, 0.5), (3, 1.0)]
    assert all(r["error"] == f"backend asleep (attempt {r['attempt']})" for r in records)
    assert all("exception" not in r for r in records)
    _no_locals(logs)


async def _until(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    for _ in range(int(seconds / 0.2)):
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {seconds:g} s: {what}")


async def _restart_under_a_train(
    env: WorkflowEnvironment, pg_server: PgServer, task_queue: str, logs: Logs
) -> None:
    """Run a train on the store, stop PostgreSQL while it holds hosts until two attempts have
    failed on it, start it again, and wait for the train to visit another host."""
    from orchestrator.contracts.arbiter_types import arbiter_workflow_id
    from orchestrator.contracts.train_types import TrainInput, TrainStatus
    from tests.train_helpers import spec
    from workflows.cluster_train import ClusterTrain

    wid = f"train-c00-{uuid.uuid4().hex[:8]}"

    async def status() -> TrainStatus:
        handle = env.client.get_workflow_handle(wid)
        return await handle.query(ClusterTrain.status, result_type=TrainStatus)

    async def holding() -> bool:
        return (await status()).in_maintenance > 0

    async def two_failed() -> bool:
        return logs.text.count("StoreUnavailable") >= 2

    try:
        await env.client.start_workflow(
            ClusterTrain.run, TrainInput(spec=spec()), id=wid, task_queue=task_queue
        )
        await _until(holding, 60, "the train holds hosts")
        visited = (await status()).hosts_visited_this_cycle
        await asyncio.to_thread(pg_server.stop, "immediate")
        try:
            await _until(two_failed, 30, "attempts fail on the store")
        finally:
            await asyncio.to_thread(pg_server.start)

        async def going_on() -> bool:
            return (await status()).hosts_visited_this_cycle > visited

        await _until(going_on, 60, "the train goes on")
    finally:
        for w in (wid, arbiter_workflow_id("c00")):
            with contextlib.suppress(RPCError):
                await env.client.get_workflow_handle(w).terminate("test cleanup")


async def test_a_postgresql_restart_under_a_worker_logs_one_line_per_retried_attempt(
    dev_env: WorkflowEnvironment,
    tmp_home: Path,
    pg_server: PgServer,
    pg_store: str,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL restarting under a worker that runs a train: each attempt that failed on the
    store is one line in both formats (kind, attempt, next retry, the error's first line), no
    line holds a traceback or a frame's locals, and the train goes on once the store is back."""
    from orchestrator.app.worker import build_worker

    init = ["fleet", "init", "--preset", "small", "--speed", "36000", "--store", pg_store]
    r = CliRunner().invoke(main, init)
    assert r.exit_code == 0, r.output
    monkeypatch.setenv(STORE_ENV, pg_store)
    with worker_logs() as logs:
        async with build_worker(dev_env.client, pg_store, task_queue):
            await _restart_under_a_train(dev_env, pg_server, task_queue, logs)
    lines = [ln for ln in logs.text.splitlines() if "StoreUnavailable" in ln]
    assert len(lines) >= 2
    for line in lines:
        assert "activity attempt failed; retrying" in line, line
        assert re.search(r"attempt=\d+ ", line) and re.search(r"next_retry_s=[\d.]+", line), line
        assert "did not answer" in line, line
    records = [r for r in logs.records() if r.get("kind") == "StoreUnavailable"]
    assert len(records) == len(lines)
    assert all(r["attempt"] >= 1 and r["next_retry_s"] and "exception" not in r for r in records)
    assert "Traceback" not in logs.text and not any("exception" in r for r in logs.records())
    assert not _LOCALS.search(logs.text) and not _LOCALS.search(logs.json_text)
