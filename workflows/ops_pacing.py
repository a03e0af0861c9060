"""How a cluster's operation paces its waves: the arbiter's grant (and re-planning
``waves_total`` only when it changes), waiting for room while outages fill the budget (at most
``max_wait_for_room``), obeying pause and abort between waves, and waiting for the spec's
maintenance windows.

A part of the ``ClusterOperation`` workflow (a mixin over its state, above ``WaveSteps``), kept
apart for size: the workflow module keeps its handlers, its loop over waves and how it starts
and closes.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from activities.arbiter_activities import ArbiterActivities
from orchestrator.contracts.arbiter_types import AcquireRequest, Grant
from orchestrator.contracts.errors import NO_ROOM
from orchestrator.contracts.ops_types import ClusterPlanView
from orchestrator.planning.windows import at_fleet_hour, waiting_text
from workflows.fleet_timing import fleet_hours_now
from workflows.ops_wave import POLL_FLEET_HOURS, WaveSteps


class WavePacing(WaveSteps):
    """Grants, room, pauses and windows between waves; the workflow provides the state."""

    paused: bool
    in_arbiter: bool
    planned_with: int | None

    # Provided by the ClusterOperation workflow.
    def _history_full(self) -> bool: ...  # type: ignore[empty-body]
    async def _release(self, reason: str) -> None: ...

    def _replan(self, total: int) -> None:
        """``waves_total`` from a plan at the arbiter's grant: set once, then changed only when
        the grant changes (or more is left than planned), with the reason in ``plan_note``."""
        p, grant = self.p, self.p.granted_hosts
        if p.waves_total == 0 or total == p.waves_done:  # the first plan, or nothing left
            p.waves_total = total
        elif grant != self.planned_with and total != p.waves_total:
            before = "the budget" if self.planned_with is None else f"{self.planned_with} hosts"
            p.plan_note = (
                f"re-planned from {p.waves_total} to {total} waves: {self.inp.cluster}'s capacity "
                f"arbiter grants {grant} hosts a wave (planned with {before})"
            )
            p.waves_total = total
        elif total > p.waves_total and p.waves_done >= p.waves_total:
            p.plan_note = (
                f"re-planned from {p.waves_total} to {total} waves: more hosts to change than "
                "planned (back from repair, or newly in scope)"
            )
            p.waves_total = total
        self.planned_with = grant

    async def _wait_for_room(self, view: ClusterPlanView) -> None:
        """Outages fill the budget: hand the arbiter back and wait for room, visibly, at most
        ``max_wait_for_room`` of fleet time since the wait began; then fail, naming the budget."""
        p, most = self.p, self.inp.spec.max_wait_for_room_hours
        if p.room_wait_since is None:
            p.room_wait_since = view.fleet_hours
        left = p.room_wait_since + most - view.fleet_hours
        if left <= 0:
            raise ApplicationError(
                f"{view.waiting_for_room}: no room within max_wait_for_room ({most:g} h)",
                type=NO_ROOM,
                non_retryable=True,
            )
        if self.in_arbiter:
            await self._release("waiting for room")
        p.waiting_for = []
        await self._phase(
            "waiting_for_room",
            f"{view.waiting_for_room}; waits for room, at most {left:.1f} h more "
            f"(max_wait_for_room {most:g} h)",
        )
        await self._poll(min(POLL_FLEET_HOURS, left))

    async def _between_waves(self) -> bool:
        """Obey pause (handing the budget back meanwhile) and abort; True to stop here."""
        if self.paused and not self.abort:
            if self.in_arbiter:
                await self._release("paused")
            await self._phase("paused", "paused by operator")
            await workflow.wait_condition(lambda: not self.paused or bool(self.abort))
            if not self.abort:
                await self._phase("planning", "resumed")
        if not self.abort and self.inp.spec.schedule is not None:
            await self._await_window()
        return bool(self.abort)

    async def _await_window(self) -> None:
        """Outside the spec's windows (or in a blackout) start no wave: hand the budget back
        and wait, in this cluster's fleet time, for the next window to open."""
        schedule, clock = self.inp.spec.schedule, self.inp.clock
        if schedule is None:
            return
        while not self.abort:
            now = fleet_hours_now(clock)
            ws, edge = at_fleet_hour(schedule, clock.anchor_wall, now)
            if ws.open:
                return
            if self.in_arbiter:
                await self._release("outside its maintenance window")
            await self._phase("waiting", waiting_text(ws))
            target = now + 24.0 if edge is None else max(now, edge + 1e-6)
            await self._wait_fleet(target, now)  # an abort cuts it short

    async def _acquire(self, want: int, limit: int) -> int:
        """Wait, visibly, until the arbiter lets this operation run alone; 0 if told to stop.

        Also 0 once the history is full: the wait goes on in the next run, still queued.
        """
        while not (self.paused or self.abort or self._history_full()):
            self.in_arbiter = True  # before asking: a cancelled ask may still have joined
            grant: Grant = await self._call(
                ArbiterActivities.acquire,
                AcquireRequest(
                    cluster=self.inp.cluster,
                    holder=self.inp.operation_id,
                    workflow_id=workflow.info().workflow_id,
                    kind="operation",
                    want=want,
                    holding=0,
                    limit=limit,
                    exclusive=True,
                ),
                summary=f"ask {self.inp.cluster}'s capacity arbiter to run alone ({want} hosts)",
            )
            self.p.waiting_for = grant.waiting_for
            if grant.granted:
                self.p.granted_hosts = grant.granted
                return grant.granted
            await self._phase("waiting", grant.reason)
            await self._poll(POLL_FLEET_HOURS)
        return 0
