"""A cluster's maintenance train as seen from outside the workers: start it, ask it, steer it.

Why this module exists: how a train meets Temporal (one workflow per cluster, ``train-<cluster>``,
its search attributes, its ``status`` query and its pause/resume/stop/reconfigure updates) is
part of the train's contract, like its spec and its messages, so it lives in this package rather
than in the command line. The CLI parses options, calls these functions and prints what they
return; the demo calls the same ones.

Every function takes a connected :class:`temporalio.client.Client` (made by
:func:`orchestrator.infra.client.connect`, which sets the pydantic data converter) and returns
models of
:mod:`orchestrator.contracts.train_types`. The workflow is addressed by its registered name rather
than by
importing ``workflows``, which import this package's messages: no import runs up a layer.
A change the train refuses raises :class:`TrainRefused` (a ``ValueError``: the caller's input);
a train that is not there raises :class:`TrainNotFound`; a train whose workers do not answer
within :data:`QUERY_TIMEOUT` / :data:`UPDATE_TIMEOUT` raises :class:`WorkerNotAnswering` rather
than waiting (the server holds a query for a worker until the caller's deadline).

A ``stop`` is idempotent: stopping a train that has already stopped answers its final status.
A stopped train holds no host, so its status shows none in maintenance (the workflow's last
counts were taken before it handed its hosts back).
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.contracts.errors import TRAIN_ALREADY_STOPPED, NotFound, Refused
from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
from orchestrator.contracts.train_spec import TrainSpec, train_workflow_id
from orchestrator.contracts.train_types import ControlRequest, TrainChange, TrainInput, TrainStatus
from orchestrator.infra.update_retry import execute_update
from orchestrator.infra.worker_answers import (  # noqa: F401 (WorkerNotAnswering: re-exported)
    QUERY_TIMEOUT,
    UPDATE_TIMEOUT,
    WorkerNotAnswering,
    not_answering,
)
from orchestrator.train.ui import train_summary

#: The name ``workflows.cluster_train.ClusterTrain`` is registered under.
WORKFLOW_NAME = "ClusterTrain"

TrainHandle = WorkflowHandle[Any, TrainStatus]
TrainAction = Literal["pause", "resume", "stop"]


#: The type of the error the train's ``stop`` validator raises once the train has stopped.

_FIELD = re.compile(r"^([A-Za-z_][\w.-]*): ")


#: The phase in which a control has nothing left to do: it succeeds, changing nothing.
ALREADY: dict[str, str] = {"pause": "paused", "resume": "running"}


class TrainNotFound(NotFound):
    """No (running) train for that cluster; the message says which. ``absent``: no train of
    that id at all (the cluster names nothing to steer), rather than one that has ended."""

    def __init__(self, message: str, absent: bool = False) -> None:
        super().__init__(message, field="cluster", absent=absent)


class TrainRefused(Refused):
    """The train refused a control or a change (its validator said why); ``field`` at fault."""


def train_handle(client: Client, cluster: str) -> TrainHandle:
    """The cluster's train, whichever run of it is the current one."""
    return client.get_workflow_handle(train_workflow_id(cluster), result_type=TrainStatus)


async def start_train(
    client: Client, spec: TrainSpec, *, task_queue: str, replace: bool = False
) -> TrainHandle:
    """Start the cluster's train (one per cluster; its id comes from the cluster).

    A train already running fails the start (``WorkflowAlreadyStartedError``), unless
    ``replace`` terminates it first.
    """
    return await client.start_workflow(
        WORKFLOW_NAME,
        TrainInput(spec=spec),
        id=spec.workflow_id,
        task_queue=task_queue,
        result_type=TrainStatus,
        id_conflict_policy=(
            WorkflowIDConflictPolicy.TERMINATE_EXISTING
            if replace
            else WorkflowIDConflictPolicy.FAIL
        ),
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(TRAIN_CLUSTER, spec.cluster),
                SearchAttributePair(TRAIN_CAMPAIGN, spec.campaign or spec.workflow_id),
                SearchAttributePair(TRAIN_PHASE, "running"),
            ]
        ),
        static_summary=train_summary(spec),
    )


def settled(status: TrainStatus) -> TrainStatus:
    """``status`` as the fleet sees it: a stopped train has handed every host back."""
    if status.state == "stopped" and status.in_maintenance:
        return status.model_copy(update={"in_maintenance": 0})
    return status


async def train_status(
    client: Client, cluster: str, *, timeout: timedelta = QUERY_TIMEOUT
) -> TrainStatus:
    """Where the cluster's train stands (its ``status`` query), waiting at most ``timeout``.
    A query the server asks to be retried (``buffered query cleared, please retry``: its
    workflow task was busy with a flood of updates; ``query buffer is full``: too many queries
    at once) is asked again a few times, backing off."""
    handle = train_handle(client, cluster)
    for attempt in range(QUERY_RETRIES):
        try:
            return await _query_status(handle, timeout)
        except TrainNotFound as err:
            if not any(busy in str(err) for busy in SERVER_BUSY) or attempt == QUERY_RETRIES - 1:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


#: Tries of a status query the server asks to retry (about 7 s of backing off in all).
QUERY_RETRIES = 8
#: What the server says when a query may succeed if asked again a little later.
SERVER_BUSY = ("please retry", "query buffer is full")


async def _query_status(handle: Any, timeout: timedelta) -> TrainStatus:
    try:
        status = await handle.query("status", result_type=TrainStatus, rpc_timeout=timeout)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TrainNotFound(f"no train {handle.id}: {err.message}", absent=True) from None
        if err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            raise await not_answering(handle, "status query", timeout) from None
        raise TrainNotFound(f"{handle.id}: status query failed: {err.message}") from None
    except WorkflowQueryFailedError as err:  # asked before the train's first task ran
        raise TrainNotFound(f"{handle.id}: status query failed: {err}") from None
    return settled(status)


async def first_status(
    client: Client, cluster: str, *, tries: int = 50, pause: float = 0.2
) -> TrainStatus:
    """The status of a train just started: its first query may come before its first task."""
    for _ in range(tries):
        try:
            return await train_status(client, cluster)
        except TrainNotFound:
            await asyncio.sleep(pause)
    return await train_status(client, cluster)


async def _final_status(handle: TrainHandle) -> TrainStatus | None:
    """The last status of a train that has ended by stopping, or None (terminated, failed...)."""
    try:
        desc = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
        if desc.status != WorkflowExecutionStatus.COMPLETED:
            return None
        status = await asyncio.wait_for(handle.result(), UPDATE_TIMEOUT.total_seconds())
    except (RPCError, TimeoutError):
        return None
    return settled(status) if status.state == "stopped" else None


async def _update(client: Client, cluster: str, name: str, arg: BaseModel) -> TrainStatus:
    handle = train_handle(client, cluster)
    try:
        return settled(
            await execute_update(
                handle, name, arg, result_type=TrainStatus, rpc_timeout=UPDATE_TIMEOUT
            )
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if (
            name == "stop"
            and isinstance(cause, ApplicationError)
            and cause.type == TRAIN_ALREADY_STOPPED
        ):
            final = await _final_status(handle)
            if final is not None:
                return final
        if name in ALREADY:  # a pause of what is paused, a resume of what runs: no error
            current = await train_status(client, cluster)
            if current.state == ALREADY[name]:
                return current
        text = str(cause.message if isinstance(cause, ApplicationError) else cause)
        m = _FIELD.match(text)
        raise TrainRefused(f"{name}: {text}", field=m.group(1) if m else None) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise await not_answering(handle, f"{name} request", UPDATE_TIMEOUT) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND and "completed" in err.message:
            final = await _final_status(handle) if name == "stop" else None
            if final is not None:
                return final  # a second stop: the train has stopped, as asked
            raise TrainNotFound(f"{handle.id} has ended: {err.message}") from None
        if err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            raise await not_answering(handle, f"{name} request", UPDATE_TIMEOUT) from None
        raise TrainNotFound(
            f"no running train {handle.id}: {err.message}",
            absent=err.status == RPCStatusCode.NOT_FOUND,
        ) from None


async def control_train(
    client: Client, cluster: str, action: TrainAction, reason: str = ""
) -> TrainStatus:
    """Pause, resume or stop the cluster's train; its status once the update is accepted."""
    return await _update(client, cluster, action, ControlRequest(reason=reason))


async def reconfigure_train(client: Client, cluster: str, change: TrainChange) -> TrainStatus:
    """Change domain size, budget or targets of a running train; the next visits use them."""
    return await _update(client, cluster, "reconfigure", change)


async def train_result(client: Client, cluster: str) -> TrainStatus:
    """Wait for the cluster's train to end (across continue-as-new); its last status."""
    return settled(await train_handle(client, cluster).result())
