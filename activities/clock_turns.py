"""A step that carries its party's turn on a logical clock takes the turn first.

A train alone on its cluster's clock (issue 27) does not ask the clock before each instant
(``advance_clock``: one activity, a billable action, per wake-up): the first fleet step of
the instant carries the wait as its ``turn``. This interceptor registers it, exactly as
``advance_clock`` would, before the step runs: the clock moves there in its own transaction
and the step then runs at that instant, the party acting. If another party came meanwhile
and the turn is not given (yet), the step does nothing and fails with ``ClockTurnPending``
(not retried): the party waits for the turn's signal and runs the step again without it.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from activities.fleet_activities import FleetActivities
from orchestrator.contracts.messages import CLOCK_TURN_PENDING, AdvanceClockRequest


class ClockTurns(Interceptor):
    """The worker's interceptor taking a step's ``turn`` (any request with one) first."""

    def __init__(self, fleet: FleetActivities, client: Client) -> None:
        self._fleet = fleet
        self._client = client

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _TakeTurnFirst(next, self._fleet, self._client)


class _TakeTurnFirst(ActivityInboundInterceptor):
    def __init__(
        self, next: ActivityInboundInterceptor, fleet: FleetActivities, client: Client
    ) -> None:
        super().__init__(next)
        self._fleet = fleet
        self._client = client

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        turn = getattr(input.args[0], "turn", None) if input.args else None
        if isinstance(turn, AdvanceClockRequest):
            res = await self._fleet.take_turn(turn, self._client, activity.info().attempt)
            if not res.released:
                raise ApplicationError(
                    f"clock: {turn.party}'s turn at fleet hour {turn.target_hours} is not given "
                    "yet (another party acts first); the step waits for it",
                    type=CLOCK_TURN_PENDING,
                    non_retryable=True,
                )
        return await self.next.execute_activity(input)
