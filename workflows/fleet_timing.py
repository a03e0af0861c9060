"""Fleet time inside workflows, the activity options every fleet call uses, when a long-lived
workflow continues as new, and the approval gates a campaign or an operation waits at.

One clock: the fleet derives its hours from the ``wall`` each activity receives (the workflow's
``workflow.now()``) times its speed, so a timer that the time-skipping server skips is skipped
for the jobs, checkpoints and repairs too. Here: the fleet hour at ``workflow.now()``, the wall
seconds fleet hours take, waits until a fleet hour, the capped poll on fleets that change
outside trainctl, and the timeouts and retries of every fleet activity call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.contracts.approvals import (
        ApprovalGate,
        ApprovalSpec,
        ApproveRequest,
        GateName,
        approve,
        find_gate,
        open_gate,
        refusal,
        time_out,
    )
    from orchestrator.contracts.errors import PERMANENT_KINDS
    from orchestrator.contracts.messages import ClockInfo

#: Fleet operations are idempotent transactions: retry transient errors (a busy database, a
#: worker that died) with backoff, never errors that will not heal.
FLEET_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
    non_retryable_error_types=list(PERMANENT_KINDS),
)


#: How long a heartbeating fleet step (an install: each host's hooks, on Slurm each up to its
#: ``command_timeout_seconds``, three attempts per host) may run, and with its retries. Its
#: heartbeat, sent while hooks run, tells a dead worker within 30 s: the bound is only a
#: backstop, set well above a domain's installs so that a slow one is never cut short and run
#: again beside itself (a minute did that to three hooks of 20 s that timed out on one host).
LONG_STEP = timedelta(hours=1)
LONG_STEP_RETRIES = timedelta(hours=2)


#: Steering a train waits for its worker's answer: retry a busy or silent train for a while;
#: what will not heal (a permanent kind: a bad spec, an unknown cluster) is not retried.
TRAIN_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": timedelta(minutes=10),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        non_retryable_error_types=list(PERMANENT_KINDS),
    ),
}
#: One look at Prometheus: a short query, retried a few times (an unreachable one holds).
PROM_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=20),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}


def fleet_options(heartbeat: bool = False) -> dict[str, Any]:
    """Timeouts and retries for one fleet activity call (``heartbeat``: a long step)."""
    opts: dict[str, Any] = {
        "start_to_close_timeout": timedelta(seconds=60),
        "schedule_to_close_timeout": timedelta(minutes=10),
        "retry_policy": FLEET_RETRY,
    }
    if heartbeat:
        opts["heartbeat_timeout"] = timedelta(seconds=30)
        opts["start_to_close_timeout"] = LONG_STEP
        opts["schedule_to_close_timeout"] = LONG_STEP_RETRIES
    return opts


async def fleet_call(
    activity: Callable[..., Any],
    req: Any,
    summary: str | None = None,
    heartbeat: bool = False,
) -> Any:
    """``workflow.execute_activity_method(activity, req)`` with ``fleet_options``."""
    opts = fleet_options(heartbeat)
    return await workflow.execute_activity_method(activity, req, summary=summary, **opts)


def fleet_hours_now(clock: ClockInfo) -> float:
    """Fleet hours at this workflow's now."""
    elapsed = (workflow.now() - clock.anchor_wall).total_seconds()
    return max(0.0, elapsed * clock.speed / 3600.0)


def wall_seconds(clock: ClockInfo, fleet_hours: float) -> float:
    """Wall seconds that ``fleet_hours`` take at this clock's speed."""
    return fleet_hours * 3600.0 / clock.speed


#: The longest a waiting train or operation goes without looking at its fleet again, in wall
#: seconds, on a fleet that changes outside trainctl (``ClockInfo.outside_changes``: Slurm,
#: whose time is wall time): a poll of a quarter of a fleet hour was a quarter of a real hour
#: there, so an operation waiting for room that nobody signals (a budget freed by a worker's
#: crash recovery, a node an operator resumed) sat that long idle. Simulated fleets keep
#: their fleet-hour polls (the time-skipping tests skip them).
MAX_POLL_WALL_SECONDS = 30.0


def capped_poll_seconds(clock: ClockInfo, seconds: float) -> float:
    """``seconds`` of a poll's wait, at most ``MAX_POLL_WALL_SECONDS`` on a fleet that changes
    outside trainctl."""
    if clock.outside_changes:
        return min(seconds, MAX_POLL_WALL_SECONDS)
    return seconds


async def sleep_until(
    clock: ClockInfo, target_hours: float, from_hours: float | None = None, look: bool = False
) -> None:
    """Wait until fleet time reaches ``target_hours``.

    ``look``: a drain's wait for its jobs, which the caller follows with a look, so on a fleet
    that changes outside trainctl (Slurm) it lasts at most ``MAX_POLL_WALL_SECONDS``: a job
    there may end long before the hour its wait was computed from (its time limit, its
    checkpoint), and nobody says so, so the cordoned node would sit idle until then."""
    # Measure from the fleet's own reading when we have one: it is what the target was computed
    # against, and a wait computed from it can never collapse to zero while time stands still.
    now = fleet_hours_now(clock) if from_hours is None else from_hours
    delay = (target_hours - now) * 3600.0 / clock.speed
    if delay > 0:
        if look:
            delay = capped_poll_seconds(clock, delay)
        await workflow.sleep(timedelta(seconds=max(delay, 0.001)))


def history_full(max_events: int, *, suggested: bool = True) -> bool:
    """Past ``max_events`` history events, or (with ``suggested``) the server suggests it.

    Reads ``workflow.info()`` only (no command)."""
    info = workflow.info()
    if suggested and info.is_continue_as_new_suggested():
        return True
    return info.get_current_history_length() > max_events


# ---------------------------------------------------------------------- approval gates
# One helper the campaign and the operation hold: it opens a gate in the status's list of
# gates, waits (a timer to the gate's deadline, cut short by the ``approve`` update or by a
# stop) and records the outcome there. The list is the status's own, so continue-as-new
# carries every decided gate into the next run, where an approved gate is not asked again.
#: Patch id of the gates in the campaign and operation workflows (``workflows.patches``).
APPROVAL_GATES = "approval-gates"


class ApprovalGates:
    """The gates of one workflow run, kept in ``gates`` (its status's list)."""

    def __init__(self, gates: list[ApprovalGate]) -> None:
        self.gates = gates

    def validate(self, req: ApproveRequest) -> None:
        """The ``approve`` validator: refuse (naming the field) what may not approve."""
        why = refusal(self.gates, req)
        if why:
            raise ValueError(why)

    def approve(self, req: ApproveRequest) -> ApprovalGate:
        gate = find_gate(self.gates, req.stage, req.gate)
        assert gate is not None  # the validator found it waiting
        approve(gate, req, workflow.now())
        return gate

    def approved(self, stage: str, gate: GateName) -> bool:
        found = find_gate(self.gates, stage, gate)
        return found is not None and found.state == "approved"

    def gate_for(
        self, spec: ApprovalSpec, stage: str, gate: GateName, command: str
    ) -> ApprovalGate:
        """The gate for ``stage``/``gate``: the one recorded (a continued run), else a new one."""
        found = find_gate(self.gates, stage, gate)
        if found is not None and found.state != "timed_out":
            return found
        opened = open_gate(spec, stage, gate, workflow.now(), command)
        self.gates.append(opened)
        return opened

    async def wait(self, gate: ApprovalGate, stop: Callable[[], bool]) -> str:
        """Wait at ``gate`` until approved ('') or stopped ('stopped'); past its deadline, the
        reason the guarded work fails."""
        left = (gate.deadline - workflow.now()).total_seconds()
        if gate.state == "waiting" and left > 0:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: gate.state != "waiting" or stop(), timeout=timedelta(seconds=left)
                )
        if gate.state == "approved":
            return ""
        if stop():
            return "stopped"
        return time_out(gate, workflow.now())
