"""Talking to a workflow whose worker may be down: bounded waits and the error that says so.

The server holds a query or an update for a worker until the caller's deadline, so with no
worker running a CLI call would hang. Every client (trains, operations, campaigns) waits at
most these deadlines and then raises :class:`WorkerNotAnswering`, which says whether the
workflow still runs and asks whether ``trainctl worker`` is running.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from orchestrator.contracts.errors import TemporaryError

#: How long a ``status`` query may wait for a worker to answer.
QUERY_TIMEOUT = timedelta(seconds=5)
#: How long a control or a change may wait for a worker to accept it.
UPDATE_TIMEOUT = timedelta(seconds=10)


class WorkerNotAnswering(TemporaryError, RuntimeError):
    """The workflow exists, but no worker answered in time (is ``trainctl worker`` running?)."""


async def not_answering(
    handle: WorkflowHandle[Any, Any], what: str, timeout: timedelta
) -> WorkerNotAnswering:
    """The error for a workflow whose worker did not answer, saying whether it runs."""
    try:
        desc = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
        state = desc.status.name.lower() if desc.status is not None else "unknown"
    except RPCError:
        state = "in an unknown state"
    return WorkerNotAnswering(
        f"{handle.id} is {state}, but no worker answered its {what} within "
        f"{timeout.total_seconds():g}s; is `trainctl worker` running?"
    )
