"""Soak between batches: no new domain (train) or wave (operation) within ``soak`` of the latest
return, so hosts just back in service run real work for a while before more are taken.

One rule for the ``ClusterTrain`` and ``ClusterOperation`` workflows (and anything else that
starts batches): pure arithmetic over fleet hours, the owner remembering when it last saw hosts
it maintained come back (``last_return_hours``).

What counts as a return: a host the owner maintained, verified and put back in service. What is
exempt, and why:

- hosts handed back untouched (a job said "not now"): nothing changed on them, nothing to watch;
- hosts back from repair: the fleet gives them every recorded target before they serve,
  whoever takes them, so holding them out would cost capacity and prove nothing new;
- piggyback takes are *not* exempt: they spread the change as much as a domain does, so a
  soaking train withdraws its standing claim on freed hosts and renews it at its next plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from orchestrator.contracts.schedule_window import Schedule
from orchestrator.execution.train_waits import (
    EDGE_MIN_SECONDS,
    EDGE_PAST_HOURS,
    NEVER_HOURS,
    IdleTimer,
)
from orchestrator.planning.windows import at_fleet_hour, waiting_text

__all__ = ["SOAK_WAIT", "Hold", "Soak", "soak_text", "soak_timer", "wave_hold"]

#: How ``soak_text`` begins (what ``status`` shows while a train or operation soaks).
SOAK_WAIT = "soaking"


@dataclass(frozen=True)
class Soak:
    """``hours`` of soak after each return (None or 0: no soak)."""

    hours: float | None

    def until(self, last_return_hours: float | None) -> float | None:
        """The fleet hour the soak after ``last_return_hours`` ends (None: no soak pending)."""
        if not self.hours or last_return_hours is None:
            return None
        return last_return_hours + self.hours

    def holds(self, now: float, last_return_hours: float | None) -> bool:
        """Whether a new domain or wave must wait at fleet hour ``now``."""
        end = self.until(last_return_hours)
        return end is not None and now < end


def soak_text(until_hours: float) -> str:
    """``soaking after the last return until fleet hour 12.50``."""
    return f"{SOAK_WAIT} after the last return until fleet hour {until_hours:,.2f}"


def soak_timer(now: float, until_hours: float, planned: IdleTimer) -> IdleTimer:
    """The idle timer of an owner soaking until fleet hour ``until_hours``: the ``planned`` look
    if it comes first, else one just past the soak's end (an exact edge, like a window's)."""
    edge = until_hours + EDGE_PAST_HOURS
    if planned.target <= edge:
        return planned
    return IdleTimer(now, max(edge, now), EDGE_MIN_SECONDS)


@dataclass(frozen=True)
class Hold:
    """Why an operation starts no wave now, and until which fleet hour it waits."""

    until: float
    text: str
    #: what the budget is handed back for while it waits
    release_reason: str
    #: the soak, not the schedule, holds it
    soak: bool = False


def wave_hold(
    schedule: Schedule | None,
    soak: Soak,
    anchor_wall: datetime,
    now: float,
    last_return_hours: float | None,
) -> Hold | None:
    """Whether a bulk operation's next wave waits at fleet hour ``now``: outside the schedule's
    windows (or in a blackout) until the next opening, else within ``soak`` of the latest return
    until the soak ends; None: the wave may start."""
    if schedule is not None:
        ws, edge = at_fleet_hour(schedule, anchor_wall, now)
        if not ws.open:
            until = now + NEVER_HOURS if edge is None else max(now, edge + EDGE_PAST_HOURS)
            return Hold(until, waiting_text(ws, schedule.zone), "outside its maintenance window")
    end = soak.until(last_return_hours)
    if end is not None and soak.holds(now, last_return_hours):
        return Hold(end + EDGE_PAST_HOURS, soak_text(end), SOAK_WAIT, soak=True)
    return None
