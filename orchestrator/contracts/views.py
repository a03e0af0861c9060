"""Plain data a fleet backend hands to the planners: one host shape, one job shape, one snapshot.

Frozen dataclasses with no behaviour beyond arithmetic, so the pure planners (``planning``)
read them without importing any fleet, and any backend (the simulated fleet, Slurm) can build
them. The two rules that every layer must agree on live here too, once: when a job checkpoints,
and whether a host is still due in a visit cycle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from orchestrator.contracts.models import HostState


def last_checkpoint(start: float, interval: float, now: float, end: float = math.inf) -> float:
    """Fleet hour of a job's latest checkpoint at or before ``now`` (its start if none yet)."""
    done = max(0.0, min(now, end) - start)
    return start + math.floor(done / interval) * interval


def next_checkpoint(start: float, interval: float, now: float, end: float = math.inf) -> float:
    """Fleet hour of a job's next checkpoint after ``now``, or its end if that comes first."""
    return min(end, last_checkpoint(start, interval, now, end) + interval)


class HostLike(Protocol):
    """What the visit-cycle rules read of a host, whichever shape carries it."""

    @property
    def state(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def last_visit(self) -> float | None: ...


def visited_since(host: HostLike, cycle_started: float) -> bool:
    """Visited since the cycle began, whatever its state now."""
    return host.last_visit is not None and host.last_visit >= cycle_started


def is_due(host: HostLike, cycle_started: float) -> bool:
    """Still to visit this cycle: in service and not visited since the cycle began (a host back
    from repair is due again: repair reimaged it, the train verifies it once more)."""
    return host.state == HostState.IN_SERVICE and not visited_since(host, cycle_started)


@dataclass(frozen=True)
class HostView:
    """One host as a planner sees it: where it sits, who holds it, what runs on it."""

    name: str
    rack: str
    zone: str
    state: str
    owner: str = ""
    job_id: int | None = None
    due: bool = False
    """Still to visit in the current cycle (see ``is_due``); only trains read it."""
    versions: Mapping[str, str] = field(default_factory=dict)
    last_visit: float | None = None
    last_boot: float | None = None
    """Fleet hour it last (re)booted, if the backend knows: a reboot operation reads it."""
    partitions: tuple[str, ...] | None = None
    """The Slurm partitions the node is in; None where the backend has none (the simulated
    fleet), so a scope by partition, hostlist or feature is refused there."""
    features: tuple[str, ...] | None = None
    """The node's Slurm (active) features; None where the backend has none."""
    reason: str = ""
    """Why the host is out of service, as its holder recorded it (a quarantine's finding, a
    repair's fault, a site's drain reason); "" in service."""


@dataclass(frozen=True)
class JobView:
    """A running job: its hosts, its end, and its checkpoints around the snapshot's ``now``."""

    id: int
    size: int
    hosts: tuple[str, ...]
    end_hours: float
    next_checkpoint_hours: float
    last_checkpoint_hours: float
    #: the end of the job's quiet hours (fleet hours, capped by the cluster's ``max_quiet``):
    #: no drain evicts it before then unless its host's deadline forces it (``planning.quiet``)
    quiet_until_hours: float | None = None

    def at(self, t: float) -> JobView | None:
        """The job as it will look at fleet hour ``t`` (None once it has ended)."""
        if t >= self.end_hours:
            return None
        interval = self.next_checkpoint_hours - self.last_checkpoint_hours
        if t < self.next_checkpoint_hours or interval <= 0:
            return self
        last = last_checkpoint(self.last_checkpoint_hours, interval, t)
        return JobView(
            self.id,
            self.size,
            self.hosts,
            self.end_hours,
            min(self.end_hours, last + interval),
            last,
            self.quiet_until_hours,
        )


@dataclass(frozen=True)
class ClusterSnapshot:
    """One cluster at fleet hour ``now``: hosts in inventory order, running jobs by id, and the
    targets recorded for it (what a host coming back from repair must get before it serves)."""

    name: str
    now: float
    hosts_total: int
    hosts: tuple[HostView, ...]
    jobs: Mapping[int, JobView]
    targets: Mapping[str, str] = field(default_factory=dict)
    #: Running jobs that answer "not now" when asked before an eviction (a simulated job's
    #: behaviour, a Slurm job's ``evict=refuse``): a plan counts the later wave they go to.
    refusing: frozenset[int] = frozenset()
