"""What end-to-end tests share: a worker, the real CLI, an operation started and awaited, a
wait, and the audit that ends every test.

The Temporal servers are fixtures (``dev_env``, ``temporal_env`` in ``conftest.py``); each
test has its own task queue (``task_queue``), hence its own capacity arbiters, ended while its
worker still runs: the Java time-skipping server stops skipping time for good once a workflow
with a task nobody will ever pick up is terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.cli import main
from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.ops_types import OperationInput, OperationStatus
from orchestrator.fleet import open_backend
from orchestrator.fleet.presets import INITIAL_VERSIONS
from orchestrator.ops import parse_spec_text
from workflows.bulk_operation import BulkOperation

ROOT = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------ a CUDA operation on c00
CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}
OLD = (INITIAL_VERSIONS["gpu_driver"], INITIAL_VERSIONS["cuda"])
NEW = (CUDA["gpu_driver"], CUDA["cuda"])


def op_spec(**overrides: Any) -> dict[str, Any]:
    """A CUDA upgrade of c00 (25% budget, 2 h drains, 3 failures allowed), fresh request id."""
    base: dict[str, Any] = {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "c00"},
        "targets": CUDA,
        "budget": {"max_unavailable": "25%"},
        "drain": {"max_wait": "2h"},
        "max_failures": 3,
        "request_id": f"t-{uuid.uuid4().hex[:8]}",
    }
    base.update(overrides)
    return base


def upper(versions: dict[str, str]) -> tuple[str, str]:
    """A host's driver/CUDA pair."""
    return versions["gpu_driver"], versions["cuda"]


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(json.dumps(spec))
    return path


# ------------------------------------------------------------------ workers and workflows
async def terminate(env: WorkflowEnvironment, workflow_id: str) -> None:
    """End a workflow the test started, if it still runs."""
    with contextlib.suppress(RPCError):
        await env.client.get_workflow_handle(workflow_id).terminate("test cleanup")


@contextlib.asynccontextmanager
async def worker(
    env: WorkflowEnvironment, path: Path, task_queue: str, cluster: str = "c00"
) -> AsyncIterator[None]:
    """A worker of the fleet at ``path`` on the test's queue; the cluster's arbiter ends with
    it (while it still runs, so nothing is left pending on its queue)."""
    arbiter = arbiter_workflow_id(cluster, task_queue)
    async with build_worker(env.client, path, task_queue):
        try:
            yield
        finally:
            await terminate(env, arbiter)


async def start_op(
    env: WorkflowEnvironment, task_queue: str, spec: dict[str, Any]
) -> WorkflowHandle[Any, OperationStatus]:
    """Start the bulk operation of ``spec`` (a dict as a YAML spec would say it)."""
    parsed = parse_spec_text(json.dumps(spec))
    return await env.client.start_workflow(
        BulkOperation.run,
        OperationInput(spec=parsed),
        id=parsed.operation_id,
        task_queue=task_queue,
    )


async def outcome(handle: WorkflowHandle[Any, OperationStatus]) -> OperationStatus:
    """The final status, whether the operation succeeded or failed."""
    try:
        return await handle.result()
    except WorkflowFailureError as err:
        return OperationStatus.model_validate(err.cause.details[0])  # type: ignore[attr-defined]


Check = Callable[[], Any | Awaitable[Any]]


async def wait_for(check: Check, what: str, timeout: float = 60.0, every: float = 0.1) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(every)


# ------------------------------------------------------------------ the CLI
def run_cli(*args: str) -> Result:
    """The CLI in this process (click's runner): for commands that need no server."""
    return CliRunner().invoke(main, list(args))


#: The CLI's entry point, leaving through os._exit once click is done: a short-lived Temporal
#: client process can abort while the interpreter finalizes (temporalio/sdk-python#300).
_CLI = """
import os, sys
from orchestrator.app.cli import main
try:
    main()
except SystemExit as done:
    code = done.code if isinstance(done.code, int) else int(done.code is not None)
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


async def trainctl(*args: str) -> tuple[int, dict[str, Any], str]:
    """Run the real CLI in a subprocess: (exit code, its JSON output, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CLI,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, json.loads(out or b"{}"), err.decode()


# ------------------------------------------------------------------ the audit
def audit_ok(path: Path) -> bool:
    """``trainctl audit`` holds on the fleet at ``path`` (SQLite, or a Slurm fleet's record)."""
    fleet = open_backend(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()  # type: ignore[attr-defined]
    assert report.ok, report.violations[:3]
    return report.ok
