"""A bulk operation as seen from outside the workers: start it, find it, wait for it, steer it.

Why this module exists: how an operation meets Temporal (its id ``ops-<request_id>``, the id
policies that make the same request one operation, its search attributes, where a failed one
keeps its status) is part of the operation's contract, like its spec and its messages, so it
lives in this package rather than in the command line. The CLI parses options, calls these
functions and prints what they return; anything else that drives operations calls the same ones.

Every function takes a connected :class:`temporalio.client.Client` (made by
:func:`orchestrator.infra.client.connect`, which sets the pydantic data converter) and returns
models of
:mod:`orchestrator.contracts.ops_types`. The workflow is addressed by its registered name rather
than by
importing ``workflows``, which import this package's messages: no import runs up a layer.
Input the caller must fix (an unknown id, a control the operation refuses) raises a
``ValueError`` subclass whose message names the field, as the specs do.

An operation continues as new as it goes, so it is one workflow id over several runs: handles
looked up by id carry no run id (queries, updates and descriptions reach the current run),
waiting follows the runs to the last one, and ``run_id`` is the first run's, the same for every
call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.contracts.approvals import ApprovalGate, ApproveRequest, refused_field
from orchestrator.contracts.errors import NotFound, Refused
from orchestrator.contracts.ops_spec import OperationSpec, operation_id
from orchestrator.contracts.ops_types import (
    ControlAction,
    OpControl,
    OperationInput,
    OperationStatus,
)
from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
from orchestrator.infra.update_retry import execute_update
from orchestrator.infra.worker_answers import (
    QUERY_TIMEOUT,
    UPDATE_TIMEOUT,
    WorkerNotAnswering,
    not_answering,
)
from orchestrator.ops.ui import operation_summary

#: The name ``workflows.bulk_operation.BulkOperation`` is registered under.
WORKFLOW_NAME = "BulkOperation"

OperationHandle = WorkflowHandle[Any, OperationStatus]


#: The state in which a control has nothing left to do: it succeeds, changing nothing.
ALREADY: dict[str, tuple[str, ...]] = {
    "pause": ("paused",),
    "resume": ("running", "waiting_for_room"),
}


class OperationNotFound(NotFound):
    """No operation has that id."""


class OperationEnded(Refused):
    """The operation has ended; it can no longer be paused, resumed or aborted."""


class ControlRefused(Refused):
    """The operation refused a pause, resume or abort (its validator said why)."""


class RequestConflict(Refused):
    """The request_id is taken by an operation of a different spec."""


class OperationStart(BaseModel):
    """What :func:`start_operation` found or did (a client-side result, not a message)."""

    operation_id: str
    run_id: str  # its first run's id: stable while it continues as new
    started: bool  # this call started it
    already_running: bool  # the same request was running before this call
    #: The final status if it ended or was waited for, the live one if it was running already.
    status: OperationStatus | None = None


def operation_handle(client: Client, op_id: str) -> OperationHandle:
    return client.get_workflow_handle(op_id, result_type=OperationStatus)


def _failed_status(op_id: str, err: WorkflowFailureError) -> OperationStatus:
    """The status a failed operation carries in its error, or a minimal one."""
    cause = err.cause
    details = cause.details if isinstance(cause, ApplicationError) else ()
    if details and isinstance(details[0], dict):
        return OperationStatus.model_validate(details[0])
    why = getattr(cause, "message", "") or str(cause)
    return OperationStatus(
        operation_id=op_id, kind="", targets={}, consistency="", state="failed", reason=why
    )


async def final_status(handle: OperationHandle) -> OperationStatus:
    """Wait for the operation to end; its final status, failed ones included."""
    try:
        result = await handle.result(follow_runs=True)
        return (
            result
            if isinstance(result, OperationStatus)
            else OperationStatus.model_validate(result)
        )
    except WorkflowFailureError as err:
        return _failed_status(handle.id, err)


async def _execution_status(handle: OperationHandle) -> WorkflowExecutionStatus | None:
    """The operation's execution status, None if there is no such workflow."""
    try:
        return (await handle.describe()).status
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def find_operation(client: Client, op_id: str) -> tuple[OperationHandle, bool]:
    """(handle, running) of an operation named ``ops-<x>`` or just ``<x>``."""
    for wid in dict.fromkeys([op_id, op_id if op_id.startswith("ops-") else f"ops-{op_id}"]):
        handle = operation_handle(client, wid)
        found = await _execution_status(handle)
        if found is not None:
            return handle, found == WorkflowExecutionStatus.RUNNING
    raise OperationNotFound(f"id: no operation {op_id!r}")


async def start_operation(
    client: Client,
    spec: OperationSpec,
    *,
    clusters: Sequence[str],
    task_queue: str,
    wait: bool = False,
    max_history_events: int | None = None,
) -> OperationStart:
    """Start the operation of ``spec``, or join it if it runs, or report it if it has ended.

    The id comes from the spec, so the same request twice is one operation: a running one is
    joined (``already_running``), a finished one is never run again. ``clusters`` are those of
    its plan (one cluster is also tagged as a search attribute). With ``wait``, or once it has
    ended, ``status`` is its final status. ``max_history_events`` overrides the history bound
    past which its workflows continue as new (tests and benchmarks lower it).
    """
    op_id = operation_id(spec)
    handle = operation_handle(client, op_id)
    found = await _execution_status(handle)
    started = False
    if found is None:
        handle, started, found = await _start_new(
            client, spec, op_id, clusters, task_queue, max_history_events
        )
    running = found == WorkflowExecutionStatus.RUNNING
    desc = await handle.describe()
    run_id = desc.raw_description.workflow_execution_info.first_run_id or desc.run_id
    if not started:
        await _require_same_spec(client, op_id, run_id, spec)
    status: OperationStatus | None = None
    if wait or not running:
        status = await final_status(handle)
    elif not started:  # the same request again: where it stands now (paused, waiting, ...)
        with contextlib.suppress(WorkerNotAnswering):  # no worker yet: nothing has moved
            status = await operation_status(client, op_id)
    return OperationStart(
        operation_id=op_id,
        run_id=run_id,
        started=started,
        already_running=running and not started,
        status=status,
    )


async def _start_new(
    client: Client,
    spec: OperationSpec,
    op_id: str,
    clusters: Sequence[str],
    task_queue: str,
    max_history_events: int | None,
) -> tuple[OperationHandle, bool, WorkflowExecutionStatus]:
    """Start the workflow of an operation not seen yet: its handle, whether this call started
    it (another request may have won the race and is joined), and its execution status."""
    inp = OperationInput(spec=spec)
    if max_history_events is not None:
        inp.max_history_events = max_history_events
    pairs = [
        SearchAttributePair(TRAIN_CAMPAIGN, op_id),
        SearchAttributePair(TRAIN_PHASE, "running"),
    ]
    if len(clusters) == 1:
        pairs.append(SearchAttributePair(TRAIN_CLUSTER, clusters[0]))
    handle = operation_handle(client, op_id)
    try:
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            inp,
            id=op_id,
            task_queue=task_queue,
            result_type=OperationStatus,
            # One operation per request: join a running one, never re-run a finished one.
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            search_attributes=TypedSearchAttributes(pairs),
            static_summary=operation_summary(spec.kind, spec.targets, spec.scope.cluster),
        )
    except WorkflowAlreadyStartedError:  # it finished between our look and our start
        return handle, False, WorkflowExecutionStatus.COMPLETED
    response = getattr(handle, "_start_workflow_response", None)
    started = bool(getattr(response, "started", True))
    return handle, started, WorkflowExecutionStatus.RUNNING


async def _require_same_spec(
    client: Client, op_id: str, first_run_id: str, spec: OperationSpec
) -> None:
    """Raise ``RequestConflict`` unless the operation ``op_id`` was started with ``spec``.

    The spec it runs is the input of its first run (later runs carry the same spec), read from
    the first event of that run's history, so a finished operation is checked as well.
    """
    handle = client.get_workflow_handle(op_id, run_id=first_run_id)
    async for event in handle.fetch_history_events():
        attrs = event.workflow_execution_started_event_attributes
        [inp] = await client.data_converter.decode(attrs.input.payloads, [OperationInput])
        theirs, ours = inp.spec.model_dump(mode="json"), spec.model_dump(mode="json")
        differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
        if differ:
            raise RequestConflict(
                f"request_id: {spec.request_id!r} is already operation {op_id}, started with a "
                f"different spec ({', '.join(differ)} differ); give this request a new "
                "request_id, or repeat the original spec to join it"
            )
        return


async def wait_for_operation(client: Client, op_id: str) -> OperationStatus:
    """Wait for the operation ``op_id`` to end; its final status."""
    handle, _ = await find_operation(client, op_id)
    return await final_status(handle)


async def operation_status(client: Client, op_id: str) -> OperationStatus:
    """Where the operation stands: its live status while it runs, else its final one."""
    handle, running = await find_operation(client, op_id)
    if not running:
        return await final_status(handle)
    try:
        return await handle.query("status", result_type=OperationStatus, rpc_timeout=QUERY_TIMEOUT)
    except RPCError as err:
        if err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            raise await not_answering(handle, "status query", QUERY_TIMEOUT) from None
        raise


async def control_operation(
    client: Client, op_id: str, action: ControlAction, reason: str = ""
) -> OperationStatus:
    """Pause, resume or abort a running operation; its status once the update is accepted."""
    handle, running = await find_operation(client, op_id)
    if not running:
        state = (await final_status(handle)).state
        raise OperationEnded(f"{action}: operation {handle.id} has ended ({state})")
    try:
        return await execute_update(
            handle,
            action,
            OpControl(reason=reason),
            result_type=OperationStatus,
            rpc_timeout=UPDATE_TIMEOUT,
        )
    except WorkflowUpdateFailedError as err:
        # A pause of what is paused, a resume of what runs: done already, so no error.
        current = await operation_status(client, handle.id)
        if current.state in ALREADY.get(action, ()):
            return current
        raise ControlRefused(f"{action}: {getattr(err.cause, 'message', err.cause)}") from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise await not_answering(handle, f"{action} request", UPDATE_TIMEOUT) from None


async def approve_operation(client: Client, op_id: str, req: ApproveRequest) -> ApprovalGate:
    """Approve the operation's gate before its start: the gate as recorded. Refused (naming
    ``approver`` or ``gate``) when none waits or the approver is not listed."""
    handle, running = await find_operation(client, op_id)
    if not running:
        state = (await final_status(handle)).state
        raise OperationEnded(f"id: operation {handle.id} has ended ({state})", field="id")
    try:
        return await execute_update(
            handle, "approve", req, result_type=ApprovalGate, rpc_timeout=UPDATE_TIMEOUT
        )
    except WorkflowUpdateFailedError as err:
        text = str(getattr(err.cause, "message", err.cause))
        raise ControlRefused(text, field=refused_field(text)) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise await not_answering(handle, "approve request", UPDATE_TIMEOUT) from None


async def arbiter_grants(
    client: Client, op_id: str, limits: Mapping[str, int], task_queue: str
) -> dict[str, int | None]:
    """Per cluster, the hosts its capacity arbiter would let operation ``op_id`` hold at once
    (an exclusive holder asking for its whole budget ``limits[cluster]``), asked by a query:
    nothing is granted. A cluster without a running arbiter grants the whole budget; one whose
    workers do not answer is None (not known)."""
    from orchestrator.contracts.arbiter_types import (
        AcquireRequest,
        ArbiterState,
        Grant,
        arbiter_workflow_id,
    )
    from orchestrator.planning.arbiter_share import would_grant

    out: dict[str, int | None] = {}
    for cluster, limit in sorted(limits.items()):
        req = AcquireRequest(
            cluster=cluster,
            holder=op_id,
            workflow_id=op_id,
            kind="operation",
            want=max(1, limit),
            limit=max(1, limit),
            exclusive=True,
        )
        handle = client.get_workflow_handle(arbiter_workflow_id(cluster, task_queue))
        try:
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                out[cluster] = req.want  # nobody holds anything there: the whole budget
                continue
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            out[cluster] = req.want
            continue
        try:
            grant = await handle.query(
                "would_grant", req, result_type=Grant, rpc_timeout=QUERY_TIMEOUT
            )
        except WorkflowQueryFailedError:  # a worker from before the query: the same rule
            state = await handle.query(
                "ledger", result_type=ArbiterState, rpc_timeout=QUERY_TIMEOUT
            )
            grant = would_grant(state, req)
        except RPCError as err:
            if err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                out[cluster] = None
                continue
            raise
        out[cluster] = grant.granted
    return out
