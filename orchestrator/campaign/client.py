"""A campaign as seen from outside the workers: start it, ask it, steer it.

One workflow per campaign name (``campaign-<name>``): starting a name that runs joins it;
starting one that has ended runs it again (hosts already on target are not touched twice). A
failed campaign fails its workflow (red in the UI) with its final status as the error's details,
which :func:`final_status` reads back. The workflow is addressed by its registered name, so this
package does not import ``workflows``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Literal

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
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.campaign.ui import campaign_summary
from orchestrator.contracts.approvals import ApprovalGate, ApproveRequest, refused_field
from orchestrator.contracts.campaign_spec import CampaignSpec, campaign_workflow_id
from orchestrator.contracts.campaign_types import CampaignControl, CampaignInput, CampaignStatus
from orchestrator.contracts.errors import NotFound, Refused
from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_PHASE
from orchestrator.infra.update_retry import execute_update
from orchestrator.infra.worker_answers import (
    QUERY_TIMEOUT,
    UPDATE_TIMEOUT,
    WorkerNotAnswering,
    not_answering,
)

#: The name ``workflows.campaign.Campaign`` is registered under.
WORKFLOW_NAME = "Campaign"
#: A campaign just started may be asked before its first workflow task ran: ask a few times.
FIRST_QUERY_TRIES = 10

CampaignHandle = WorkflowHandle[Any, CampaignStatus]
CampaignAction = Literal["pause", "resume", "abort"]
#: How long ``campaign abort`` waits for the campaign to end before it answers ``aborting``.
ABORT_WAIT = 30.0


#: The state in which a control has nothing left to do: it succeeds, changing nothing.
ALREADY: dict[str, str] = {"pause": "paused", "resume": "running"}


class CampaignNotFound(NotFound):
    """No campaign of that id; the message names ``id``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="id")


class CampaignRefused(Refused):
    """The campaign refused a control (its validator said why); the campaign's ``id`` is at
    fault."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="id")


class CampaignStart(BaseModel):
    campaign_id: str
    started: bool
    already_running: bool
    status: CampaignStatus | None = None


def campaign_handle(client: Client, campaign_id: str) -> CampaignHandle:
    return client.get_workflow_handle(campaign_id, result_type=CampaignStatus)


async def _execution(handle: CampaignHandle) -> WorkflowExecutionStatus | None:
    try:
        desc = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return desc.status


async def start_campaign(
    client: Client,
    spec: CampaignSpec,
    *,
    task_queue: str,
    wait: bool = False,
    poll_seconds: float | None = None,
    on_progress: Callable[[CampaignStatus], None] | None = None,
) -> CampaignStart:
    """Start the campaign of ``spec`` (or join it if it runs); with ``wait``, its final status."""
    handle = campaign_handle(client, spec.workflow_id)
    running = await _execution(handle) == WorkflowExecutionStatus.RUNNING
    if not running:
        inp = CampaignInput(spec=spec)
        if poll_seconds is not None:
            inp.poll_seconds = poll_seconds
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            inp,
            id=spec.workflow_id,
            task_queue=task_queue,
            result_type=CampaignStatus,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(TRAIN_CAMPAIGN, spec.workflow_id),
                    SearchAttributePair(TRAIN_PHASE, "running"),
                ]
            ),
            static_summary=campaign_summary(spec),
        )
    if wait:
        status = await outcome_status(client, handle, on_progress=on_progress)
    else:
        status = await _first_status(client, spec)
    return CampaignStart(
        campaign_id=spec.workflow_id,
        started=not running,
        already_running=running,
        status=status,
    )


async def _first_status(client: Client, spec: CampaignSpec) -> CampaignStatus:
    """Where a campaign just started (or joined) stands; before a worker has run its first
    task, a status saying so rather than none (``"status": null`` told the caller nothing)."""
    with contextlib.suppress(CampaignNotFound, WorkerNotAnswering, RPCError):
        return await campaign_status(client, spec.workflow_id)
    return CampaignStatus(
        campaign_id=spec.workflow_id,
        name=spec.name,
        targets=spec.targets,
        state="starting",
        reason="waiting for a worker to run its first step",
    )


def _failed_status(campaign_id: str, err: WorkflowFailureError) -> CampaignStatus:
    cause = err.cause
    details = cause.details if isinstance(cause, ApplicationError) else ()
    if details and isinstance(details[0], dict):
        return CampaignStatus.model_validate(details[0])
    if details and isinstance(details[0], CampaignStatus):
        return details[0]
    why = getattr(cause, "message", "") or str(cause)
    return CampaignStatus(
        campaign_id=campaign_id, name=campaign_id, targets={}, state="failed", reason=why
    )


async def final_status(handle: CampaignHandle) -> CampaignStatus:
    """Wait for the campaign to end (across continue-as-new); its final status."""
    try:
        return await handle.result(follow_runs=True)
    except WorkflowFailureError as err:
        return _failed_status(handle.id, err)


async def outcome_status(
    client: Client,
    handle: CampaignHandle,
    poll_seconds: float = 2.0,
    on_progress: Callable[[CampaignStatus], None] | None = None,
) -> CampaignStatus:
    """The final status, or the live one as soon as the campaign is held on blame (it then
    waits for an operator: whoever waits on it should hear now, not at the end).
    ``on_progress`` hears each live status it looks at (``campaign start --wait`` prints it)."""
    end = asyncio.ensure_future(final_status(handle))
    latest = campaign_handle(client, handle.id)  # the current run, across continue-as-new
    try:
        while True:
            done, _ = await asyncio.wait({end}, timeout=poll_seconds)
            if done:
                return end.result()
            with contextlib.suppress(RPCError, WorkflowQueryFailedError):
                live = await latest.query("status", result_type=CampaignStatus)
                if on_progress is not None:
                    on_progress(live)
                if live.held_on_blame:
                    return live
    finally:
        end.cancel()


async def campaign_status(client: Client, campaign_id: str) -> CampaignStatus:
    """Its live status while it runs, else its final one."""
    handle = campaign_handle(client, campaign_id)
    found = await _execution(handle)
    if found is None:
        raise CampaignNotFound(f"id: no campaign {campaign_id!r}")
    if found != WorkflowExecutionStatus.RUNNING:
        return await final_status(handle)
    for attempt in range(FIRST_QUERY_TRIES):
        try:
            return await handle.query(
                "status", result_type=CampaignStatus, rpc_timeout=QUERY_TIMEOUT
            )
        except WorkflowQueryFailedError as err:  # asked before its first workflow task ran
            if attempt + 1 == FIRST_QUERY_TRIES:
                raise CampaignNotFound(f"id: {campaign_id}: status query failed: {err}") from None
            await asyncio.sleep(0.3)
        except RPCError as err:
            if err.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                raise await not_answering(handle, "status query", QUERY_TIMEOUT) from None
            raise CampaignNotFound(f"id: {campaign_id}: status query failed: {err}") from None
    raise AssertionError("unreachable")


async def control_campaign(
    client: Client, campaign_id: str, action: CampaignAction, reason: str = ""
) -> CampaignStatus:
    """Pause, resume or abort; its status once the update is accepted. An abort waits (at
    most ``ABORT_WAIT`` seconds) for the campaign to hand its hosts back and end, so what it
    prints is the state after the abort; one that takes longer says ``aborting``."""
    handle = campaign_handle(client, campaign_id)
    try:
        accepted: CampaignStatus = await execute_update(
            handle,
            action,
            CampaignControl(reason=reason),
            result_type=CampaignStatus,
            rpc_timeout=UPDATE_TIMEOUT,
        )
        if action != "abort":
            return accepted
        try:
            return await asyncio.wait_for(final_status(handle), ABORT_WAIT)
        except TimeoutError:
            return accepted.model_copy(
                update={
                    "state": "aborting",
                    "reason": reason or "aborted by operator: handing hosts back",
                }
            )
    except WorkflowUpdateFailedError as err:
        # A pause of what is paused, a resume of what runs: done already, so no error.
        current = await campaign_status(client, campaign_id)
        if current.state == ALREADY.get(action):
            return current
        cause = err.cause
        text = str(cause.message if isinstance(cause, ApplicationError) else cause)
        raise CampaignRefused(f"{action}: {text}") from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise await not_answering(handle, f"{action} request", UPDATE_TIMEOUT) from None
    except RPCError as err:
        raise CampaignNotFound(f"id: no running campaign {campaign_id!r}: {err.message}") from None


def resolve_id(value: str) -> str:
    """``campaign-<name>`` from either the id or the bare name."""
    return value if value.startswith("campaign-") else campaign_workflow_id(value)


async def approve_campaign(client: Client, campaign_id: str, req: ApproveRequest) -> ApprovalGate:
    """Approve a waiting gate of the campaign: the gate as recorded. Refused (naming
    ``approver``, ``stage`` or ``gate``) when no such gate waits or the approver is not listed."""
    handle = campaign_handle(client, campaign_id)
    try:
        return await execute_update(
            handle, "approve", req, result_type=ApprovalGate, rpc_timeout=UPDATE_TIMEOUT
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        text = str(cause.message if isinstance(cause, ApplicationError) else cause)
        raise Refused(text, field=refused_field(text)) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise await not_answering(handle, "approve request", UPDATE_TIMEOUT) from None
    except RPCError as err:
        raise CampaignNotFound(f"id: no running campaign {campaign_id!r}: {err.message}") from None
