"""The ``schedule:`` of a train, operation or campaign spec: maintenance windows and blackouts.

One model for every spec, so the three read the same way::

    schedule:
      windows: [{cron: "0 22 * * 1-5", duration: 6h}]      # open 22:00-04:00 on weekdays
      blackouts: [{from: 2026-12-24T00:00:00Z, to: 2026-12-27T00:00:00Z}]
      hard_stop: false

Everything is in fleet time: at ``--speed 1`` wall-clock UTC, at a demo speed the fleet's own
clock (``anchor + fleet hours``), like every duration in a spec. Outside every window, or inside
a blackout, the owner takes no new hosts; work in flight finishes (or, with ``hard_stop``, is
handed back when the window closes). No windows at all means always open, except blackouts.

Not to be confused with an operation's ``window`` (a larger budget granted for a bounded time):
that one says how much may be out at once, this one says when work may happen at all.

Evaluation (when the next window opens, when this one closes) is pure planning:
``orchestrator.planning.windows``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.contracts.cron import parse_cron
from orchestrator.contracts.models import DurationHours, parse_duration_hours

__all__ = ["Blackout", "Schedule", "Window"]

#: The most windows and blackouts a schedule may list (each is evaluated on every look).
MAX_ENTRIES = 64


class Window(BaseModel):
    """Open for ``duration`` from each instant ``cron`` names (fleet time)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Five-field cron expression (fleet time, UTC) of each window's opening.
    cron: str
    duration_hours: DurationHours = Field(alias="duration")

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        parse_cron(v)  # a ValueError names what is wrong
        return " ".join(v.split())

    @field_validator("duration_hours", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        hours = parse_duration_hours(v, "duration")
        if hours <= 0:
            raise ValueError("duration: must be longer than zero")
        return hours


class Blackout(BaseModel):
    """No new work from ``from`` to ``to`` (fleet time; a time without a zone is UTC)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Start of the blackout (ISO 8601).
    start: datetime = Field(alias="from")
    #: End of the blackout (ISO 8601), after its start.
    end: datetime = Field(alias="to")

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    @model_validator(mode="after")
    def _ordered(self) -> Blackout:
        if self.end <= self.start:
            raise ValueError("to: must be after from")
        return self


class Schedule(BaseModel):
    """When work may happen: inside a window and outside every blackout."""

    model_config = ConfigDict(extra="forbid")

    #: Recurring windows; new work starts only inside one (none: always open).
    windows: list[Window] = Field(default_factory=list, max_length=MAX_ENTRIES)
    #: Fixed periods with no new work, whatever the windows say.
    blackouts: list[Blackout] = Field(default_factory=list, max_length=MAX_ENTRIES)
    #: Hand back hosts in flight when a window closes, instead of letting them finish.
    hard_stop: bool = False

    @model_validator(mode="after")
    def _something(self) -> Schedule:
        if not self.windows and not self.blackouts:
            raise ValueError("schedule: give windows, blackouts or both")
        return self
