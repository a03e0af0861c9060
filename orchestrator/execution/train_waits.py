"""When a cluster's train looks at its fleet again: its maintenance windows and its idle timer.

Pure decisions over the train's state and fleet hours, interpreted by the ``ClusterTrain``
workflow (which reads the fleet hour from ``workflow.now()`` and turns fleet hours into wall
seconds). Outside its windows (or inside a blackout) a train takes no new hosts; its timer then
runs to the next window edge, computed by ``orchestrator.planning.windows`` from the cron in
fleet time. Nothing else changes, so the cycle carries on where it stopped when the next window
opens. Without a window, the train looks again when the planner asks (its retry hour), at its
poll, or, holding all it may, just before its standing claim would lapse.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.train_types import TrainState
from orchestrator.execution.cycle import next_look_hours
from orchestrator.execution.take import PIGGYBACK_CLAIM_HOURS
from orchestrator.planning.windows import (
    WINDOW_WAITS,
    WindowState,
    fleet_datetime,
    fleet_hours_at,
    waiting_text,
    window_state,
)

#: A waiting train looks again at ``next_look_hours`` (its poll or the planner's retry), but
#: never more often than this in wall time: domains signal their progress anyway.
MIN_POLL_SECONDS = 1.0
#: A train holding all it may polls only to keep its standing claim: just before
#: the claim would lapse, instead of every POLL_FLEET_HOURS. Such a plan changes nothing else:
#: the planner has no slot to fill, and the domains' progress wakes the train as hosts return.
CAPPED_POLL_FLEET_HOURS = 0.95 * PIGGYBACK_CLAIM_HOURS
#: The shortest timer to a window edge (wall seconds): edges are exact, unlike polls.
EDGE_MIN_SECONDS = 0.01
#: Timers to an edge end this far past it (fleet hours), so the look after them is past it.
EDGE_PAST_HOURS = 1e-6
#: When no window opens within the planner's horizon, look again after this many fleet hours.
NEVER_HOURS = 24.0


@dataclass(frozen=True)
class IdleTimer:
    """The train's next look: from fleet hour ``now`` to ``target``, lasting at least
    ``min_seconds`` of wall time (None: the usual ``MIN_POLL_SECONDS``)."""

    now: float
    target: float
    min_seconds: float | None = None

    def floor_seconds(self) -> float:
        return MIN_POLL_SECONDS if self.min_seconds is None else self.min_seconds


def idle_timer(now: float, retry_at_hours: float | None, capped: bool) -> IdleTimer:
    """The look the planner wants (its retry hour or the poll); a train holding all it may
    (``capped``) looks only to keep its standing claim."""
    target = next_look_hours(now, retry_at_hours)
    if capped:
        target = now + CAPPED_POLL_FLEET_HOURS
    return IdleTimer(now, target)


class TrainWindows:
    """The schedule of one train run, evaluated at the fleet hours it is given."""

    def __init__(self, schedule: Schedule, anchor_wall: datetime, state: TrainState) -> None:
        self.schedule = schedule
        self.anchor_wall = anchor_wall
        self.state = state

    def look(self, now: float) -> WindowState:
        """The window state at fleet hour ``now``, recorded in the train's state for ``status``.

        The ``waiting`` text moves with it: a window may close while the train plans (its idle
        timer is the next look), and ``status`` must never say "waiting for a window" with no
        reason, or keep a window's reason once the window opened (display only: no command
        depends on it)."""
        ws = window_state(self.schedule, fleet_datetime(self.anchor_wall, now))
        st = self.state
        st.window_state = ws.state
        st.next_window_start = ws.next_start
        st.window_closes_at = ws.closes_at
        if not ws.open:
            st.waiting = waiting_text(ws, self.schedule.zone)
        elif st.waiting.startswith(WINDOW_WAITS):
            st.waiting = ""
        return ws

    def closes_hours(self) -> float | None:
        """The fleet hour the open window closes (None: not within reach); for the fleet's
        piggyback claim, which must lapse with the window."""
        close = self.state.window_closes_at
        return None if close is None else fleet_hours_at(self.anchor_wall, close)

    def allows(self, now: float) -> bool:
        """Whether the train may take hosts at fleet hour ``now``."""
        return self.look(now).open

    def timer(self, now: float, planned: IdleTimer) -> IdleTimer:
        """The idle timer from fleet hour ``now``: the ``planned`` look, unless a window edge
        comes first (or, while closed, the next start instead)."""
        ws = self.look(now)
        edge = ws.closes_at if ws.open else ws.next_start
        if edge is None:
            return IdleTimer(now, planned.target) if ws.open else IdleTimer(now, now + NEVER_HOURS)
        edge_hours = fleet_hours_at(self.anchor_wall, edge) + EDGE_PAST_HOURS
        if not ws.open or edge_hours <= planned.target:
            return IdleTimer(now, max(edge_hours, now), EDGE_MIN_SECONDS)
        return IdleTimer(now, planned.target)


def train_windows(
    schedule: Schedule | None, anchor_wall: datetime, state: TrainState
) -> TrainWindows | None:
    """The train's windows, if its spec has a schedule."""
    if schedule is None:
        state.window_state = ""
        return None
    return TrainWindows(schedule, anchor_wall, state)
