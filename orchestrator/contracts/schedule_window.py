"""The ``schedule:`` of a train, operation or campaign spec: maintenance windows and blackouts.

One model for every spec, so the three read the same way::

    schedule:
      windows: [{cron: "0 22 * * 1-5", duration: 6h}]      # open 22:00-04:00 on weekdays
      blackouts: [{from: 2026-12-24T00:00:00Z, to: 2026-12-27T00:00:00Z}]
      hard_stop: false
      time_zone: America/Los_Angeles                      # optional, default UTC

Everything is in fleet time: at ``--speed 1`` wall-clock UTC, at a demo speed the fleet's own
clock (``anchor + fleet hours``), like every duration in a spec. Outside every window, or inside
a blackout, the owner takes no new hosts; work in flight finishes (or, with ``hard_stop``, is
handed back when the window closes). No windows at all means always open, except blackouts.

``time_zone`` (an IANA name, default UTC) names the calendar the fleet clock is read in: a
window's cron and a blackout's times without an offset are local times there, so
``0 2 * * *`` opens at 02:00 Pacific in winter and in summer alike. A window lasts
``duration`` of elapsed time (a 02:00 + 3h window on the spring-forward night opens at 03:00,
the first local time after the skipped 02:00, and closes at 06:00). Blackout times with an
offset (``Z``, ``-08:00``) mean that instant whatever the zone.

Not to be confused with an operation's ``window`` (a larger budget granted for a bounded time):
that one says how much may be out at once, this one says when work may happen at all.

Evaluation (when the next window opens, when this one closes) is pure planning:
``orchestrator.planning.windows``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.contracts.cron import parse_cron
from orchestrator.contracts.models import DurationHours, parse_duration_hours

__all__ = ["Blackout", "Schedule", "Window", "parse_time_zone"]

#: The most windows and blackouts a schedule may list (each is evaluated on every look).
MAX_ENTRIES = 64


def parse_time_zone(name: object) -> ZoneInfo:
    """The IANA zone ``name`` names, or a ValueError naming ``time_zone``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("time_zone: give an IANA time zone name, e.g. America/Los_Angeles")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"time_zone: {name!r} is not an IANA time zone (e.g. UTC, Europe/Paris, "
            "America/Los_Angeles)"
        ) from None


class Window(BaseModel):
    """Open for ``duration`` from each instant ``cron`` names (fleet time)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Five-field cron expression of each window's opening (fleet time, in the schedule's
    #: ``time_zone``).
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
    """No new work from ``from`` to ``to`` (fleet time; a time without an offset is in the
    schedule's ``time_zone``, UTC by default)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Start of the blackout (ISO 8601).
    start: datetime = Field(alias="from")
    #: End of the blackout (ISO 8601), after its start.
    end: datetime = Field(alias="to")

    def in_zone(self, zone: ZoneInfo) -> Blackout:
        """This blackout with times lacking an offset read in ``zone``, every time in UTC."""
        start, end = (
            (t.replace(tzinfo=zone) if t.tzinfo is None else t).astimezone(UTC)
            for t in (self.start, self.end)
        )
        return self.model_copy(update={"start": start, "end": end})


class Schedule(BaseModel):
    """When work may happen: inside a window and outside every blackout."""

    model_config = ConfigDict(extra="forbid")

    #: Recurring windows; new work starts only inside one (none: always open).
    windows: list[Window] = Field(default_factory=list, max_length=MAX_ENTRIES)
    #: Fixed periods with no new work, whatever the windows say.
    blackouts: list[Blackout] = Field(default_factory=list, max_length=MAX_ENTRIES)
    #: Hand back hosts in flight when a window closes, instead of letting them finish.
    hard_stop: bool = False

    #: The IANA time zone the windows' crons and offset-less blackout times are read in.
    time_zone: str = "UTC"

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        return parse_time_zone(v).key

    @model_validator(mode="after")
    def _something(self) -> Schedule:
        if not self.windows and not self.blackouts:
            raise ValueError("schedule: give windows, blackouts or both")
        zone = self.zone
        self.blackouts = [b.in_zone(zone) for b in self.blackouts]
        for i, b in enumerate(self.blackouts):
            if b.end <= b.start:
                raise ValueError(f"blackouts.{i}.to: must be after from")
        return self

    @property
    def zone(self) -> ZoneInfo:
        """The zone named by ``time_zone`` (the standard library caches each one)."""
        return ZoneInfo(self.time_zone)
