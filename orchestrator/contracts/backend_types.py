"""The plain values the fleet-backend Protocols (``backend``) pass in and out: an install's
outcome, a job's answer and refusal, a train's piggyback claim, a verification, one entry of
and the append-only record. ``backend`` re-exports
them, so callers name them from there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class InstallOutcome:
    """One install attempt: installed, failed (transiently or for good), and on which component."""

    ok: bool
    permanent: bool
    failed_component: str | None
    #: Fleet hours the install and reboot still take after this call returns; None: the
    #: model's estimate (``updates.maintenance_hours``). A real backend whose install ran for
    #: real says 0: the time has already passed.
    duration_hours: float | None = None
    #: Why it failed, as the backend saw it ("timed out after 20s", the hook's first line).
    reason: str = ""


@dataclass(frozen=True)
class RefusalNote:
    """A job said "not now" to a train that handed its hosts back rather than hold them: ask
    it again at ``until_hours``; its ``refusals`` so far carry over to the next visit
    (``execution.drain``). Dropped when the job ends or stops."""

    until_hours: float
    refusals: int


@dataclass(frozen=True)
class PiggybackClaim:
    """A train's standing claim on freed due hosts, with the limits its plan was held to."""

    owner: str
    cycle_started_hours: float
    max_held: int
    """Hosts the owner may hold in all (its domain size within the arbiter's grant)."""
    limit: int
    maintenance: int | None = None
    per_rack: int | None = None
    per_zone: int | None = None
    until_hours: float = 0.0
    """Fleet hour the claim lapses (the train renews it each time it plans)."""
    visited_first: bool = False
    """Steer new jobs to hosts visited this cycle first, the longest job first, so that due
    hosts are the ones left idle for maintenance (Slurm's node ``Weight`` does the same: jobs
    go to the lowest weight first), and a job that will outlive the cycle lands on hosts it
    need not be stopped for."""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


class Verification(NamedTuple):
    """Hardware diagnostics, collective bandwidth against roofline, version manifest."""

    passed: bool
    reason: str
    bus_bw: float


@dataclass(frozen=True)
class JobAnswer:
    """A job's answer when asked before an eviction: ``go`` now, ``wait`` until ``until_hours``
    (its next checkpoint or its end), or ``refuse`` (not now; the drain deadline still rules)."""

    answer: str = "go"
    until_hours: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class RecordEntry:
    """One entry of a backend's append-only record of what was done and seen."""

    t: float
    actor: str
    kind: str
    host: str | None
    detail: Mapping[str, Any]


__all__ = [
    "InstallOutcome",
    "JobAnswer",
    "PiggybackClaim",
    "RecordEntry",
    "RefusalNote",
    "Verification",
]
