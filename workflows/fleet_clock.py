"""Fleet time inside workflows, and the activity options every fleet call uses.

One clock: the fleet derives its hours from the ``wall`` each activity receives (the workflow's
``workflow.now()``), so a timer that the time-skipping server skips is skipped for the jobs,
checkpoints and repairs too. A fleet at speed ``max`` has a logical clock instead, which
workflows move forward explicitly when they would otherwise wait.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.errors import PERMANENT_KINDS
    from orchestrator.execution.messages import AdvanceClockRequest, ClockInfo

#: Fleet operations are idempotent transactions: retry transient errors (a busy database, a
#: worker that died) with backoff, never errors that will not heal.
FLEET_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
    non_retryable_error_types=list(PERMANENT_KINDS),
)


def fleet_options(heartbeat: bool = False) -> dict[str, Any]:
    """Timeouts and retries for one fleet activity call."""
    opts: dict[str, Any] = {
        "start_to_close_timeout": timedelta(seconds=60),
        "schedule_to_close_timeout": timedelta(minutes=10),
        "retry_policy": FLEET_RETRY,
    }
    if heartbeat:
        opts["heartbeat_timeout"] = timedelta(seconds=30)
    return opts


def fleet_hours_now(clock: ClockInfo) -> float:
    """Fleet hours at this workflow's now (scaled clocks only)."""
    elapsed = (workflow.now() - clock.anchor_wall).total_seconds()
    return max(0.0, elapsed * clock.speed / 3600.0)


async def sleep_until(
    clock: ClockInfo, target_hours: float, from_hours: float | None = None
) -> None:
    """Wait until fleet time reaches ``target_hours``."""
    if clock.logical:
        await workflow.execute_activity_method(
            FleetActivities.advance_clock,
            AdvanceClockRequest(target_hours=target_hours),
            **fleet_options(),
        )
        return
    # Measure from the fleet's own reading when we have one: it is what the target was computed
    # against, and a wait computed from it can never collapse to zero while time stands still.
    now = fleet_hours_now(clock) if from_hours is None else from_hours
    delay = (target_hours - now) * 3600.0 / clock.speed
    if delay > 0:
        await workflow.sleep(timedelta(seconds=max(delay, 0.001)))


def wall_seconds(clock: ClockInfo, fleet_hours: float) -> float:
    """Wall seconds that ``fleet_hours`` take at this clock's speed (0 for 'max')."""
    return 0.0 if clock.logical else fleet_hours * 3600.0 / clock.speed
