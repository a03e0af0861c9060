"""Standard five-field cron expressions, evaluated as pure functions over UTC datetimes.

Maintenance windows start at the instants a cron names (``0 22 * * 1-5``: 22:00 on weekdays),
in fleet time. Workflows compute their window timers from it, so the evaluation must be
deterministic and free of I/O and the wall clock: this module is plain arithmetic over the
datetimes it is given (minute resolution), and small enough to sit at the bottom of the layering
next to the models that validate a spec's ``cron`` with it.

An expression reads in UTC unless a ``zone`` (an IANA ``ZoneInfo``) names the calendar its
fields are in. Across a daylight-saving change a local time the clocks skip (02:30 on the
spring-forward night) fires at the same instant as the wall time one offset earlier would
(03:30 local); a local time the clocks pass twice (01:30 on the fall-back night) fires once, at
its first pass. Both are ``fold=0``, the standard library's reading.

Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or jan-dec), day of week
(0-7, 0 and 7 both Sunday, or sun-sat); each ``*``, a value, a range ``a-b``, a step ``*/n`` or
``a-b/n``, or a comma list of those. As in Vixie cron, when both day fields are restricted a day
matching either one matches. ``@hourly``, ``@daily``, ``@weekly``, ``@monthly`` and ``@yearly``
are accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["Cron", "next_fire", "parse_cron", "prev_fire"]

_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
#: How far ahead (or back) a search looks: a Feb 29 expression fires within 8 years.
HORIZON_DAYS = 366 * 8 + 2


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the allowed values of each field."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month was "*"
    any_weekday: bool  # day of week was "*"

    def day_matches(self, day: datetime) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return dow
        if self.any_weekday:
            return dom
        return dom or dow


def _field(text: str, lo: int, hi: int, names: dict[str, int], what: str) -> tuple[set[int], bool]:
    out: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"{what}: bad step {step_text!r}")
            step = int(step_text)
        if body == "*":
            start, end = lo, hi
        else:
            first, _, last = body.partition("-")
            start = _value(first, lo, hi, names, what)
            end = _value(last, lo, hi, names, what) if last else (hi if step_text else start)
            if end < start:
                raise ValueError(f"{what}: range {body!r} runs backwards")
        out.update(range(start, end + 1, step))
    return out, text == "*"


def _value(text: str, lo: int, hi: int, names: dict[str, int], what: str) -> int:
    key = text.lower()
    if key in names:
        return names[key]
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise ValueError(f"{what}: {text!r} is not in {lo}-{hi}")
    return int(text)


def parse_cron(expr: str) -> Cron:
    """Parse ``expr``; a ValueError says which field is wrong and why."""
    if not isinstance(expr, str):
        raise ValueError("not a cron expression (five fields, e.g. '0 22 * * 1-5')")
    text = " ".join(expr.split())
    if not text:
        raise ValueError("is empty: a cron expression has five fields, e.g. '0 22 * * 1-5'")
    fields = _MACROS.get(text.lower(), text).split(" ")
    if len(fields) != 5:
        raise ValueError(f"{expr!r} has {len(fields)} fields, a cron expression has five")
    minutes, _ = _field(fields[0], 0, 59, {}, "minute")
    hours, _ = _field(fields[1], 0, 23, {}, "hour")
    days, any_day = _field(fields[2], 1, 31, {}, "day of month")
    months, _ = _field(fields[3], 1, 12, _MONTHS, "month")
    weekdays, any_weekday = _field(fields[4], 0, 7, _DAYS, "day of week")
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}
    cron = Cron(
        text=text,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(weekdays),
        any_day=any_day,
        any_weekday=any_weekday,
    )
    if next_fire(cron, datetime(2000, 1, 1, tzinfo=UTC)) is None:
        raise ValueError(f"{expr!r} never fires (no such day)")
    return cron


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _is_utc(zone: tzinfo | None) -> bool:
    return zone is None or zone is UTC or str(zone) in ("UTC", "Etc/UTC")


def next_fire(cron: Cron, at: datetime, zone: tzinfo | None = None) -> datetime | None:
    """The first instant ``>= at`` that ``cron`` names (read in ``zone``), in UTC, or None within
    the horizon."""
    at = _utc(at)
    if not _is_utc(zone):
        return _next_zoned(cron, at, zone)
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    for _ in range(HORIZON_DAYS):
        if cron.day_matches(day):
            for h in cron.hours:
                for m in cron.minutes:
                    t = day.replace(hour=h, minute=m)
                    if t >= at:
                        return t
        day += timedelta(days=1)
    return None


def prev_fire(cron: Cron, at: datetime, zone: tzinfo | None = None) -> datetime | None:
    """The last instant ``<= at`` that ``cron`` names (read in ``zone``), in UTC, or None within
    the horizon."""
    at = _utc(at)
    if not _is_utc(zone):
        return _prev_zoned(cron, at, zone)
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    for _ in range(HORIZON_DAYS):
        if cron.day_matches(day):
            for h in reversed(cron.hours):
                for m in reversed(cron.minutes):
                    t = day.replace(hour=h, minute=m)
                    if t <= at:
                        return t
        day -= timedelta(days=1)
    return None


def _fires_on(cron: Cron, local_day: datetime, zone: tzinfo | None) -> list[datetime]:
    """The UTC instants ``cron`` names on one local calendar day (skipped times shift forward, so
    the list is not always in order)."""
    if not cron.day_matches(local_day):
        return []
    return [
        local_day.replace(hour=h, minute=m, tzinfo=zone).astimezone(UTC)
        for h in cron.hours
        for m in cron.minutes
    ]


def _next_zoned(cron: Cron, at: datetime, zone: tzinfo | None) -> datetime | None:
    # Naive local days; the day before is looked at too, as a skipped time may land after ``at``.
    day = at.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    day -= timedelta(days=1)
    for _ in range(HORIZON_DAYS + 1):
        later = [t for t in _fires_on(cron, day, zone) if t >= at]
        if later:
            return min(later)
        day += timedelta(days=1)
    return None


def _prev_zoned(cron: Cron, at: datetime, zone: tzinfo | None) -> datetime | None:
    day = at.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    day += timedelta(days=1)
    for _ in range(HORIZON_DAYS + 1):
        earlier = [t for t in _fires_on(cron, day, zone) if t <= at]
        if earlier:
            return max(earlier)
        day -= timedelta(days=1)
    return None
