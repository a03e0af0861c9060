"""What a job says about its own eviction: the one grammar of a Slurm job's ``--comment``.

Slurm cannot ask a job whether it may stop; a job tells trainctl in its ``--comment`` instead,
as ``key=value`` words among any other text (``"llm-7b ckpt=10m evict=refuse"``). Words are
separated by spaces, commas or semicolons; a word without ``=`` is free text and means nothing
to trainctl. The keys:

- ``ckpt=<interval>``: the job checkpoints every interval from its start (a duration as the
  specs write them: ``90s``, ``10m``, ``2h``; a bare number is hours; above zero);
- ``evict=go|wait|refuse``: its answer when asked before an eviction: go ahead; wait (for its
  next checkpoint with ``ckpt=``, else for its end); not now.

A key trainctl does not know, a value it cannot read, or a key given again is ignored: it
lands in ``ignored`` verbatim, the rest of the comment still counts, and the caller records an
event (``job_comment_ignored``); nothing in a comment can fail a drain. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.contracts.models import parse_duration_hours

#: The answers ``evict=`` takes.
EVICT_ANSWERS = ("go", "wait", "refuse")
#: The keys a comment may carry.
KEYS = ("ckpt", "evict")
_WORDS = re.compile(r"[\s,;]+")


@dataclass(frozen=True)
class JobComment:
    """A comment as trainctl reads it."""

    #: the checkpoint interval the job declares (``ckpt=``), in hours
    ckpt_hours: float | None = None
    #: its answer to "may we evict you?" (``evict=``), if it states one
    evict: str | None = None
    #: the ``key=value`` words ignored (unknown key, unreadable value, repeated key), verbatim
    ignored: tuple[str, ...] = ()


def parse_job_comment(text: str) -> JobComment:
    """Read ``text`` by the grammar above; never raises."""
    ckpt: float | None = None
    evict: str | None = None
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
        else:
            evict = value.lower() if value.lower() in EVICT_ANSWERS else None
            ok = evict is not None
        if ok:
            seen.add(key)
        else:
            ignored.append(word)
    return JobComment(ckpt, evict, tuple(ignored))


def _interval(value: str) -> float | None:
    try:
        hours = parse_duration_hours(value, "ckpt")
    except ValueError:
        return None
    return hours if hours > 0 else None


__all__ = ["EVICT_ANSWERS", "KEYS", "JobComment", "parse_job_comment"]
