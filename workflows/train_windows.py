"""A train's maintenance windows inside its workflow: when it may take hosts, and its timers.

The train asks :meth:`TrainWindows.allows` before it plans; outside its windows (or inside a
blackout) it takes no new hosts, and with ``hard_stop`` it cancels its domains, whose
cancellation hands their hosts back (``DomainMaintenance``'s hand-back). Its idle timer then
runs to the next window edge (:meth:`TrainWindows.timer`), computed by the pure
``orchestrator.planning.windows`` from the cron in fleet time: ``workflow.now()`` through the
fleet's clock. Nothing else changes, so
the cycle carries on where it stopped when the next window opens.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.contracts.messages import ClockInfo
    from orchestrator.contracts.schedule_window import Schedule
    from orchestrator.contracts.train_types import TrainState
    from orchestrator.planning.windows import (
        WINDOW_WAITS,
        WindowState,
        fleet_datetime,
        fleet_hours_at,
        waiting_text,
        window_state,
    )
    from workflows.fleet_timing import fleet_hours_now

#: The shortest timer to a window edge (wall seconds): edges are exact, unlike polls.
EDGE_MIN_SECONDS = 0.01
#: Timers to an edge end this far past it (fleet hours), so the look after them is past it.
EDGE_PAST_HOURS = 1e-6
#: When no window opens within the planner's horizon, look again after this many fleet hours.
NEVER_HOURS = 24.0


class TrainWindows:
    """The schedule of one train run, evaluated at the train's fleet time."""

    def __init__(self, schedule: Schedule, clock: ClockInfo, state: TrainState) -> None:
        self.schedule = schedule
        self.clock = clock
        self.state = state
        self._cancelled: set[asyncio.Task[None]] = set()

    def fleet_now(self) -> float:
        """The train's fleet hour now (deterministic: from workflow time)."""
        return fleet_hours_now(self.clock)

    def look(self) -> WindowState:
        """The window state now, recorded in the train's state for ``status``.

        The ``waiting`` text moves with it: a window may close while the train plans (its idle
        timer is the next look), and ``status`` must never say "waiting for a window" with no
        reason, or keep a window's reason once the window opened (display only: no command
        depends on it, so replay is unchanged)."""
        at = fleet_datetime(self.clock.anchor_wall, self.fleet_now())
        ws = window_state(self.schedule, at)
        st = self.state
        st.window_state = ws.state
        st.next_window_start = ws.next_start
        st.window_closes_at = ws.closes_at
        if not ws.open:
            st.waiting = waiting_text(ws)
        elif st.waiting.startswith(WINDOW_WAITS):
            st.waiting = ""
        return ws

    def closes_hours(self) -> float | None:
        """The fleet hour the open window closes (None: not within reach); for the fleet's
        piggyback claim, which must lapse with the window."""
        close = self.state.window_closes_at
        return None if close is None else fleet_hours_at(self.clock.anchor_wall, close)

    def allows(self) -> bool:
        """Whether the train may take hosts now."""
        return self.look().open

    def closed(self, domains: set[asyncio.Task[None]]) -> None:
        """Outside the windows: say so, and with ``hard_stop`` hand the domains' hosts back."""
        self.look()  # says why it waits
        if self.schedule.hard_stop:
            for task in list(domains):
                if task not in self._cancelled:
                    self._cancelled.add(task)
                    task.cancel()  # the domain hands its hosts back, then ends
                    task.add_done_callback(_retrieve)
            self._cancelled &= domains

    def timer(self, now: float, target: float) -> tuple[float, float, float | None]:
        """``(now, target, min_seconds)`` for the idle timer: the planner's look at ``target``,
        unless a window edge comes first (or, while closed, the next start instead); a
        ``min_seconds`` of None keeps the train's usual floor between polls."""
        now = self.fleet_now()
        ws = self.look()
        edge = ws.closes_at if ws.open else ws.next_start
        if edge is None:
            return (now, target, None) if ws.open else (now, now + NEVER_HOURS, None)
        edge_hours = fleet_hours_at(self.clock.anchor_wall, edge) + EDGE_PAST_HOURS
        if not ws.open or edge_hours <= target:
            return (now, max(edge_hours, now), EDGE_MIN_SECONDS)
        return (now, target, None)


def _retrieve(task: asyncio.Task[None]) -> None:
    """A domain cancelled at a window's close ends in a ChildWorkflowError nobody awaits: it
    is the expected outcome, so take it (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()


def train_windows(
    schedule: Schedule | None, clock: ClockInfo, state: TrainState
) -> TrainWindows | None:
    """The train's windows, if its spec has a schedule."""
    if schedule is None:
        state.window_state = ""
        return None
    return TrainWindows(schedule, clock, state)
