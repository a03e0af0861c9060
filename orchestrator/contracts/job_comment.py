"""What a job says about its own eviction: the one grammar of a Slurm job's ``--comment``.

Slurm cannot ask a job whether it may stop; a job tells trainctl in its ``--comment`` instead,
as ``key=value`` words among any other text (``"llm-7b ckpt=10m evict=refuse"``). Words are
separated by spaces, commas or semicolons; a word without ``=`` is free text and means nothing
to trainctl. The keys:

- ``ckpt=<interval>``: the job checkpoints every interval from its start (a duration as the
  specs write them: ``90s``, ``10m``, ``2h``; a bare number is hours; above zero);
- ``evict=go|wait|refuse``: its answer when asked before an eviction: go ahead; wait (for its
  next checkpoint with ``ckpt=``, else for its end); not now;
- ``quiet_until=<instant>``: quiet hours: the job may not be evicted before this ISO 8601 UTC
  instant (``2026-12-24T00:00Z``; an instant with another offset is not read), within the
  cluster's ``max_quiet`` of its start, unless its host's deadline forces it
  (``planning.quiet``).

A key trainctl does not know, a value it cannot read, or a key given again is ignored: it
lands in ``ignored`` verbatim, the rest of the comment still counts, and the caller records an
event (``job_comment_ignored``); nothing in a comment can fail a drain. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from orchestrator.contracts.models import parse_duration_hours

#: The answers ``evict=`` takes.
EVICT_ANSWERS = ("go", "wait", "refuse")
#: A cluster's ``max_quiet`` unless its settings say otherwise: a day, enough to finish a
#: deadline run or an evaluation without letting one job keep its hosts from a weekly cycle.
DEFAULT_MAX_QUIET_HOURS = 24.0
#: The keys a comment may carry.
KEYS = ("ckpt", "evict", "quiet_until")
_WORDS = re.compile(r"[\s,;]+")


@dataclass(frozen=True)
class JobComment:
    """A comment as trainctl reads it."""

    #: the checkpoint interval the job declares (``ckpt=``), in hours
    ckpt_hours: float | None = None
    #: its answer to "may we evict you?" (``evict=``), if it states one
    evict: str | None = None
    #: the end of the job's quiet hours (``quiet_until=``), a UTC instant
    quiet_until: datetime | None = None
    #: the ``key=value`` words ignored (unknown key, unreadable value, repeated key), verbatim
    ignored: tuple[str, ...] = ()


def parse_job_comment(text: str) -> JobComment:
    """Read ``text`` by the grammar above; never raises."""
    ckpt: float | None = None
    evict: str | None = None
    quiet: datetime | None = None
    seen: set[str] = set()
    ignored: list[str] = []
    for word in _WORDS.split(text or ""):
        key, eq, value = word.partition("=")
        if not eq:
            continue  # free text
        key = key.lower()
        if key in seen or key not in KEYS:
            ignored.append(word)
            continue
        if key == "ckpt":
            ckpt = _interval(value)
            ok = ckpt is not None
        elif key == "evict":
            evict = value.lower() if value.lower() in EVICT_ANSWERS else None
            ok = evict is not None
        else:
            quiet = utc_instant(value)
            ok = quiet is not None
        if ok:
            seen.add(key)
        else:
            ignored.append(word)
    return JobComment(ckpt, evict, quiet, tuple(ignored))


def _interval(value: str) -> float | None:
    try:
        hours = parse_duration_hours(value, "ckpt")
    except ValueError:
        return None
    return hours if hours > 0 else None


def utc_instant(value: str) -> datetime | None:
    """An ISO 8601 instant in UTC (``Z`` or ``+00:00``), or None when ``value`` is not one."""
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.utcoffset() != timedelta(0):
        return None  # a local time or another offset: an owner's instant must say UTC
    return at.astimezone(UTC)


def quiet_hours(
    quiet_until: datetime | None, anchor: datetime | None, start: float, max_quiet: float
) -> float | None:
    """The fleet hour a job's quiet hours end (``anchor`` is fleet hour 0), at most
    ``max_quiet`` hours after its ``start``; None without quiet hours or a calendar."""
    if quiet_until is None or anchor is None:
        return None
    hours = (quiet_until - anchor).total_seconds() / 3600.0
    return min(hours, start + max(max_quiet, 0.0))


__all__ = [
    "DEFAULT_MAX_QUIET_HOURS",
    "quiet_hours",
    "EVICT_ANSWERS",
    "KEYS",
    "JobComment",
    "parse_job_comment",
    "utc_instant",
]
