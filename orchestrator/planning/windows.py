"""Maintenance windows and blackouts, evaluated: is work allowed now, until when, or from when.

Pure functions over a :class:`~orchestrator.contracts.schedule_window.Schedule` and a fleet
datetime, so a
workflow can turn the answer into timers deterministically and tests can check edges directly.
Fleet datetimes are ``anchor + fleet hours`` (:func:`fleet_datetime`): at ``--speed 1`` that is
wall-clock UTC.

Overlapping windows merge (a window that opens before the last one closes extends it); a
blackout beats any window. "Never" is answered as None: a schedule always open within the
search horizon has no close, one that never opens again has no next start.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from orchestrator.contracts.cron import Cron, next_fire, parse_cron, prev_fire
from orchestrator.contracts.schedule_window import Schedule

__all__ = [
    "WindowState",
    "at_fleet_hour",
    "edge_text",
    "fleet_datetime",
    "fleet_hours_at",
    "waiting_text",
    "window_state",
]

#: How far ahead the evaluation looks for an edge before it answers "never".
HORIZON = timedelta(days=400)
#: A bound on merging and skipping steps (each is one window start or one blackout end).
MAX_STEPS = 10_000

OPEN, WAITING, BLACKOUT = "open", "waiting", "blackout"


@dataclass(frozen=True)
class WindowState:
    """``state`` is ``open``, ``waiting`` (between windows) or ``blackout``.

    ``closes_at`` is when an open window closes (None: not within the horizon);
    ``next_start`` when the next window opens, if not open now (None: never, within it).
    """

    state: str
    closes_at: datetime | None = None
    next_start: datetime | None = None

    @property
    def open(self) -> bool:
        return self.state == OPEN


def fleet_datetime(anchor: datetime, hours: float) -> datetime:
    """The fleet's datetime ``hours`` after its anchor (fleet hour 0)."""
    return anchor + timedelta(hours=hours)


def fleet_hours_at(anchor: datetime, at: datetime) -> float:
    """The fleet hour of datetime ``at``."""
    return (at - anchor).total_seconds() / 3600.0


def _in_window(schedule: Schedule, at: datetime) -> datetime | None:
    """The latest end of a window covering ``at``, or None when none does."""
    if not schedule.windows:
        return at + HORIZON
    best: datetime | None = None
    for w in schedule.windows:
        start = prev_fire(_cron(w.cron), at, schedule.zone)
        if start is not None:
            end = start + timedelta(hours=w.duration_hours)
            if end > at and (best is None or end > best):
                best = end
    return best


def _window_end(schedule: Schedule, at: datetime, end: datetime) -> datetime | None:
    """Where the run of windows covering ``at`` (the first ending at ``end``) stops: a window
    starting before (or as) the run ends extends it."""
    limit = at + HORIZON
    for _ in range(MAX_STEPS):
        if end >= limit:
            return None
        extended = end
        for w in schedule.windows:
            start = prev_fire(_cron(w.cron), end, schedule.zone)
            if start is not None:
                extended = max(extended, start + timedelta(hours=w.duration_hours))
        if extended <= end:
            return end
        end = extended
    return None


def _blackout_at(schedule: Schedule, at: datetime) -> datetime | None:
    """The end of the blackouts covering ``at`` (chained), or None when none does."""
    end: datetime | None = None
    probe = at
    for _ in range(MAX_STEPS):
        covering = [b.end for b in schedule.blackouts if b.start <= probe < b.end]
        if not covering:
            return end
        end = probe = max(covering)
    return end


def _next_start(schedule: Schedule, at: datetime) -> datetime | None:
    limit = at + HORIZON
    probe = at
    for _ in range(MAX_STEPS):
        if probe >= limit:
            return None
        blackout_end = _blackout_at(schedule, probe)
        if blackout_end is not None:
            probe = blackout_end
            continue
        if _in_window(schedule, probe) is not None:
            return probe
        zone = schedule.zone
        starts = [s for w in schedule.windows if (s := next_fire(_cron(w.cron), probe, zone))]
        if not starts:
            return None
        probe = min(starts)
    return None


@functools.lru_cache(maxsize=256)
def _cron(text: str) -> Cron:
    return parse_cron(text)


def window_state(schedule: Schedule, at: datetime) -> WindowState:
    """Whether work is allowed at fleet datetime ``at``, and the next edge either way."""
    if _blackout_at(schedule, at) is not None:
        return WindowState(BLACKOUT, next_start=_next_start(schedule, at))
    end = _in_window(schedule, at)
    if end is None:
        return WindowState(WAITING, next_start=_next_start(schedule, at))
    closes = _window_end(schedule, at, end) if schedule.windows else None
    upcoming = [b.start for b in schedule.blackouts if b.start > at]
    if upcoming and (closes is None or min(upcoming) < closes):
        closes = min(upcoming)
    return WindowState(OPEN, closes_at=closes)


def at_fleet_hour(
    schedule: Schedule, anchor: datetime, hours: float
) -> tuple[WindowState, float | None]:
    """The state at fleet hour ``hours`` (fleet hour 0 at ``anchor``), and the fleet hour of its
    next edge: where an open window closes, or the next one opens (None: not within reach)."""
    ws = window_state(schedule, fleet_datetime(anchor, hours))
    edge = ws.closes_at if ws.open else ws.next_start
    return ws, None if edge is None else fleet_hours_at(anchor, edge)


#: How ``waiting_text`` begins: a wait that is the schedule's, not the planner's.
BLACKOUT_WAIT = "in a blackout"
OUTSIDE_WAIT = "outside its maintenance window"
WINDOW_WAITS = (BLACKOUT_WAIT, OUTSIDE_WAIT)


def edge_text(at: datetime, zone: tzinfo | None = None) -> str:
    """``2026-12-01 22:00`` (UTC), or ``2026-12-01 22:00 PST (2026-12-02 06:00 UTC)`` in a zone:
    a window edge in the schedule's own calendar and in UTC."""
    utc = f"{at.astimezone(UTC):%Y-%m-%d %H:%M}"
    if zone is None or str(zone) in ("UTC", "Etc/UTC"):
        return utc
    local = at.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()} ({utc} UTC)"


def waiting_text(ws: WindowState, zone: tzinfo | None = None) -> str:
    """``outside its maintenance window until 2026-12-01 22:00 fleet time``, or the blackout's;
    in a schedule's ``zone``, the local time first and UTC beside it."""
    what = BLACKOUT_WAIT if ws.state == BLACKOUT else OUTSIDE_WAIT
    when = f" until {edge_text(ws.next_start, zone)} fleet time" if ws.next_start else ""
    return what + (when or " (none opens within 400 days)")
