"""Recurring operations and campaigns as Temporal Schedules: create, list, pause, resume, delete.

Temporal owns the recurrence: a Schedule (on the UI's Schedules page and in ``temporal schedule
list``) starts the workflow at each instant its cron names, with overlap policy SKIP, so a run
still going when the next is due makes that one a skip rather than a second run beside it.
Each run gets the schedule's workflow id plus the instant it was due (Temporal's suffix), and
tells the workflow so (``scheduled``), which takes that id as its own name, so runs own hosts,
children and records apart. trainctl marks its schedules with a memo (``trainctl_kind``) and
lists only those.

The cron of a Schedule is read on the Temporal server's clock, which is wall time, in the spec's
``schedule.time_zone`` (UTC without one; the server applies daylight saving): a schedule says
when to start work; a spec's ``schedule:`` windows (fleet time) say when work may proceed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.contracts.cron import parse_cron
from orchestrator.contracts.errors import NotFound, Refused

__all__ = [
    "KIND_MEMO",
    "ScheduleExists",
    "ScheduleNotFound",
    "ScheduleRun",
    "ScheduleView",
    "create_schedule",
    "delete_schedule",
    "list_schedules",
    "pause_schedule",
    "resume_schedule",
    "schedule_view",
    "trigger_schedule",
]

#: The memo key that marks a schedule as trainctl's, with what it starts (operation, campaign).
KIND_MEMO = "trainctl_kind"
_Started = ScheduleActionExecutionStartWorkflow
#: The memo key keeping the cron as given.
CRON_MEMO = "trainctl_cron"
#: How many past runs a view shows.
RECENT = 10


class ScheduleExists(Refused):
    """A schedule with that id exists already (exit 2: give another id, or delete it)."""


class ScheduleNotFound(NotFound):
    """No trainctl schedule has that id."""


class ScheduleRun(BaseModel):
    workflow_id: str
    run_id: str
    scheduled_at: datetime
    started_at: datetime


class ScheduleView(BaseModel):
    """What ``trainctl schedule list`` shows of one schedule."""

    schedule_id: str
    kind: str
    workflow_type: str
    cron: list[str]
    #: The IANA time zone the cron is read in.
    time_zone: str = "UTC"
    overlap: str
    paused: bool
    note: str = ""
    next_runs: list[datetime] = Field(default_factory=list)
    recent_runs: list[ScheduleRun] = Field(default_factory=list)
    running: list[str] = Field(default_factory=list)
    runs_total: int = 0
    skipped_overlap: int = 0


def check_cron(expr: str) -> str:
    """``expr`` normalised, or a ValueError naming ``cron``."""
    try:
        return parse_cron(expr).text
    except ValueError as err:
        raise ValueError(f"cron: {err}") from None


async def create_schedule(
    client: Client,
    schedule_id: str,
    *,
    kind: str,
    workflow: str,
    arg: Any,
    task_queue: str,
    cron: str,
    summary: str = "",
    search_attributes: TypedSearchAttributes | None = None,
    id_field: str = "request_id",
    time_zone: str = "UTC",
) -> ScheduleView:
    """A Schedule starting ``workflow(arg)`` at each instant of ``cron`` (read in ``time_zone``,
    an IANA name), overlap SKIP.

    ``id_field`` is the spec field the schedule's id comes from (named when the id is taken).
    """
    cron = check_cron(cron)
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            workflow,
            arg,
            id=schedule_id,
            task_queue=task_queue,
            typed_search_attributes=search_attributes or TypedSearchAttributes.empty,
            static_summary=summary or None,
        ),
        spec=ScheduleSpec(cron_expressions=[cron], time_zone_name=time_zone),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note=f"trainctl {kind}: {summary}"[:200]),
    )
    try:
        handle = await client.create_schedule(
            schedule_id, schedule, memo={KIND_MEMO: kind, CRON_MEMO: cron}
        )
    except ScheduleAlreadyRunningError:
        raise ScheduleExists(
            f"{id_field}: a schedule {schedule_id!r} exists; delete it "
            f"(`trainctl schedule delete --id {schedule_id}`) or give a new {id_field}"
        ) from None
    return await _view(handle)


def _overlap_name(policy: ScheduleOverlapPolicy) -> str:
    return policy.name.lower()


async def _view(handle: ScheduleHandle, desc: ScheduleDescription | None = None) -> ScheduleView:
    desc = desc or await handle.describe()
    memo = await desc.memo()
    action = desc.schedule.action
    workflow_type = getattr(action, "workflow", "")
    info = desc.info
    recent = []
    for done in info.recent_actions[-RECENT:]:
        run = done.action
        if isinstance(run, ScheduleActionExecutionStartWorkflow):
            recent.append(
                ScheduleRun(
                    workflow_id=run.workflow_id,
                    run_id=run.first_execution_run_id,
                    scheduled_at=done.scheduled_at,
                    started_at=done.started_at,
                )
            )
    return ScheduleView(
        schedule_id=desc.id,
        kind=str(memo.get(KIND_MEMO, "")),
        workflow_type=str(workflow_type),
        # The server keeps a cron as calendar specs; the memo keeps it as written.
        cron=[str(memo[CRON_MEMO])]
        if CRON_MEMO in memo
        else list(desc.schedule.spec.cron_expressions),
        time_zone=desc.schedule.spec.time_zone_name or "UTC",
        overlap=_overlap_name(desc.schedule.policy.overlap),
        paused=desc.schedule.state.paused,
        note=desc.schedule.state.note or "",
        next_runs=list(info.next_action_times[:5]),
        recent_runs=recent,
        running=[a.workflow_id for a in info.running_actions if isinstance(a, _Started)],
        runs_total=info.num_actions,
        skipped_overlap=info.num_actions_skipped_overlap,
    )


async def _ours(client: Client, schedule_id: str) -> tuple[ScheduleHandle, ScheduleDescription]:
    handle = client.get_schedule_handle(schedule_id)
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ScheduleNotFound(f"id: no schedule {schedule_id!r}") from None
        raise
    if KIND_MEMO not in await desc.memo():
        raise ScheduleNotFound(f"id: schedule {schedule_id!r} is not one of trainctl's")
    return handle, desc


async def schedule_view(client: Client, schedule_id: str) -> ScheduleView:
    handle, desc = await _ours(client, schedule_id)
    return await _view(handle, desc)


async def list_schedules(client: Client, kinds: Sequence[str] | None = None) -> list[ScheduleView]:
    """trainctl's schedules (of ``kinds``, if given), by id."""
    out = []
    async for entry in await client.list_schedules():
        memo = await entry.memo()
        if KIND_MEMO not in memo or (kinds and memo[KIND_MEMO] not in kinds):
            continue
        handle = client.get_schedule_handle(entry.id)
        try:
            out.append(await _view(handle))
        except RPCError as err:  # deleted between the listing and the look
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
    return sorted(out, key=lambda v: v.schedule_id)


async def pause_schedule(client: Client, schedule_id: str, reason: str = "") -> ScheduleView:
    handle, _ = await _ours(client, schedule_id)
    await handle.pause(note=reason or "paused by operator")
    return await _view(handle)


async def resume_schedule(client: Client, schedule_id: str, reason: str = "") -> ScheduleView:
    handle, _ = await _ours(client, schedule_id)
    await handle.unpause(note=reason or "resumed by operator")
    return await _view(handle)


async def trigger_schedule(client: Client, schedule_id: str) -> ScheduleView:
    """Start a run now, under the schedule's overlap policy (skipped while one runs)."""
    handle, _ = await _ours(client, schedule_id)
    await handle.trigger()
    return await _view(handle)


async def delete_schedule(client: Client, schedule_id: str) -> ScheduleView:
    """Delete the schedule (runs already started go on); what it was."""
    handle, desc = await _ours(client, schedule_id)
    view = await _view(handle, desc)
    await handle.delete()
    return view
