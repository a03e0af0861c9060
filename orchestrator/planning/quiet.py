"""Quiet hours: a job's protected interval, and when a drain may still evict inside it.

A job declares the end of its quiet hours (``quiet_until=`` in the job grammar,
``contracts.job_comment``); a backend turns it into fleet hours, capped at the cluster's
``max_quiet`` after the job's start (``contracts.job_comment.quiet_hours``), so no job can
hold hosts indefinitely. A drain asks and waits around it: no eviction is decided for an
instant inside the interval (``hold``), past the drain's own deadline if need be, unless the
host's deadline comes first, which is the host's last visit plus the train's
``cycle_target`` (``host_deadline``); then the job is evicted at that deadline and the record
says so (``quiet_job_evicted``). Without a ``cycle_target`` (an operation) nothing forces it
before the end of its quiet hours. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.contracts.views import JobView

_EPS = 1e-6


@dataclass(frozen=True)
class QuietHold:
    """No eviction before ``until_hours``; ``forced`` when the host's deadline cut the job's
    quiet hours short."""

    until_hours: float
    forced: bool


def host_deadline(last_visits: Iterable[float | None], cycle_target: float | None) -> float | None:
    """The earliest deadline of a job's hosts: each host's last visit (fleet hour 0 if it was
    never visited) plus ``cycle_target``; None without a target."""
    if cycle_target is None:
        return None
    visits = [0.0 if v is None else v for v in last_visits]
    return min(visits) + cycle_target if visits else None


def hold(job: JobView, now: float, deadline: float | None) -> QuietHold | None:
    """How long a drain must leave ``job`` alone at fleet hour ``now`` (None: not quiet)."""
    q = job.quiet_until_hours
    if q is None or q <= now + _EPS:
        return None
    if deadline is not None and deadline < q:
        return QuietHold(max(deadline, now), True)
    return QuietHold(q, False)


def not_before(at: float, quiet_until: float | None) -> float:
    """An eviction instant moved out of the quiet hours."""
    return at if quiet_until is None else max(at, quiet_until)


__all__ = ["QuietHold", "hold", "host_deadline", "not_before"]
