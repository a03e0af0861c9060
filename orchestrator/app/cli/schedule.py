"""``trainctl schedule list|pause|resume|trigger|delete``: recurring operations and campaigns.

The schedules are Temporal Schedules (``ops start --cron``, ``campaign start --cron``); these
commands steer only trainctl's own (marked by a memo), through ``orchestrator.infra.schedules``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import click
from temporalio.client import Client

from orchestrator.app.cli.common import (
    emit,
    handle_errors,
    json_option,
    reason_option,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.infra.schedules import (
    ScheduleView,
    delete_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    trigger_schedule,
)

id_option = click.option("--id", "schedule_id", required=True, help="Schedule id (as listed).")


def print_schedule(o: dict[str, Any]) -> None:
    state = "paused" if o["paused"] else "active"
    click.echo(
        f"{o['schedule_id']}: {o['kind']} ({o['workflow_type']}), {state}, cron "
        f"{', '.join(o['cron'])}{_zone(o)}, overlap {o['overlap']}"
    )
    if o["next_runs"]:
        click.echo(f"  next: {o['next_runs'][0]}")
    if o["running"]:
        click.echo(f"  running: {', '.join(o['running'])}")
    click.echo(f"  runs: {o['runs_total']}, skipped (overlap): {o['skipped_overlap']}")


def _zone(o: dict[str, Any]) -> str:
    """`` (America/Los_Angeles)`` after a cron read in a zone other than UTC."""
    zone = o.get("time_zone") or "UTC"
    return "" if zone == "UTC" else f" ({zone})"


def _run(coro: Awaitable[Any]) -> Any:
    """Run ``coro``; no such schedule (or one that exists) exits 2 by ``handle_errors``."""
    return asyncio.run(coro)  # type: ignore[arg-type]


@click.group("schedule")
def schedule() -> None:
    """Recurring operations and campaigns (Temporal Schedules): list, pause, resume, delete."""


@schedule.command("list")
@connection_options
@json_option
@handle_errors
def list_cmd(address: str | None, as_json: bool) -> None:
    """trainctl's schedules: cron, state, next run, recent runs."""

    async def go() -> list[ScheduleView]:
        return await list_schedules(await connect_or_fail(address))

    views = [v.model_dump(mode="json") for v in _run(go())]

    def human(o: dict[str, Any]) -> None:
        if not o["schedules"]:
            click.echo("no schedules")
        for v in o["schedules"]:
            print_schedule(v)

    emit({"schedules": views}, as_json, human)


def _one(
    name: str, doc: str, act: Callable[[Client, str, str], Awaitable[ScheduleView]]
) -> click.Command:
    @click.command(name, help=doc)
    @id_option
    @reason_option
    @connection_options
    @json_option
    @handle_errors
    def cmd(schedule_id: str, reason: str, address: str | None, as_json: bool) -> None:
        async def go() -> ScheduleView:
            return await act(await connect_or_fail(address), schedule_id, reason)

        emit(_run(go()).model_dump(mode="json"), as_json, print_schedule)

    return cmd


for _name, _doc, _act in (
    ("pause", "Start no more runs until resumed (a run in progress goes on).", pause_schedule),
    ("resume", "Start runs again at the schedule's instants.", resume_schedule),
    (
        "trigger",
        "Start a run now (skipped if one is running: overlap SKIP).",
        lambda c, i, _r: trigger_schedule(c, i),
    ),
    (
        "delete",
        "Delete the schedule (a run in progress goes on).",
        lambda c, i, _r: delete_schedule(c, i),
    ),
):
    schedule.add_command(_one(_name, _doc, _act))

COMMANDS = [schedule]
