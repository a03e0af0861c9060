"""The fleet-backend interface: what a real inventory plus job scheduler expose, in host terms.

Everything above the fleet (activities, the execution core, the simulator) talks to a backend
only through these Protocols (``open_fleet`` returns a ``FleetBackend``): the simulated fleet and
the Slurm backend implement them, over the one host ledger they share (``fleet.ledger``). The
plain values they pass live in ``backend_types``. A ``ClusterBackend``
is one cluster at one fleet instant: a ``FleetBackend`` hands one out per transaction
(``cluster``), so a plan and the cordons it decides land together or not at all.

Host reads return ``HostRecord``s (read-only attributes); changes go through the methods, each of
which appends to the backend's append-only record (``record``), which the audit replays.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from orchestrator.contracts.backend_types import (
    InstallOutcome,
    JobAnswer,
    PiggybackClaim,
    RecordEntry,
    RefusalNote,
    Verification,
)
from orchestrator.contracts.bad_versions import BadVersion
from orchestrator.contracts.views import ClusterSnapshot, JobView


class HostRecord(Protocol):
    """One host as the backend holds it (read-only for callers)."""

    @property
    def name(self) -> str: ...
    @property
    def zone(self) -> str: ...
    @property
    def rack(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def job_id(self) -> int | None: ...
    @property
    def versions(self) -> Mapping[str, str]: ...
    @property
    def last_visit(self) -> float | None: ...


class ClusterBackend(Protocol):
    """One cluster at fleet hour ``now``: read hosts and jobs, act on hosts, append the record."""

    @property
    def name(self) -> str: ...
    @property
    def now(self) -> float: ...

    # ------------------------------------------------------------------ reads
    def host_names(self) -> Sequence[str]:
        """Every host of the cluster, in inventory order."""
        ...

    def host(self, name: str) -> HostRecord: ...

    def job(self, job_id: int) -> JobView | None:
        """A running job with its end and checkpoints as of ``now`` (None once it is gone)."""
        ...

    def out_of_service_count(self) -> int:
        """Hosts out of service for any reason (maintenance, failure, repair, quarantine)."""
        ...

    def snapshot(self, cycle_started_hours: float | None = None) -> ClusterSnapshot:
        """Plain data for the planners; with a cycle start, each host says whether it is due."""
        ...

    def recorded_targets(self) -> Mapping[str, str]:
        """Versions recorded for the cluster: repaired hosts get them before they serve."""
        ...

    # ---------------------------------------------------------------- changes
    def set_targets(self, targets: Mapping[str, str], actor: str) -> None: ...
    def unset_targets(self, components: Sequence[str], actor: str) -> None: ...

    def cordon(
        self,
        name: str,
        owner: str,
        actor: str,
        limit: int,
        per_rack: int | None = None,
        per_zone: int | None = None,
        maintenance: int | None = None,
        piggyback: bool = False,
    ) -> bool:
        """Take a host out of scheduling for ``owner`` if the budget still allows it, checked in
        the same transaction: at most ``limit`` hosts out for any reason (the floor) and, if
        given, ``maintenance`` hosts held for planned work by every owner together."""
        ...

    def set_piggyback(self, claim: PiggybackClaim | None) -> None:
        """Leave (None: withdraw) a train's standing claim: due hosts a job's end or failure
        frees are cordoned for it, within the claim's limits, before any job is placed on them."""
        ...

    def rack_switches(self) -> Mapping[str, str]:
        """rack -> the firmware of its rack switch."""
        ...

    def update_switch(self, rack: str, version: str, actor: str) -> str:
        """Install ``version`` on ``rack``'s switch once every host below it is out of service
        (``actor``'s free of jobs); '' when done, else why it was refused."""
        ...

    def check_in_place(self, name: str, actor: str) -> bool:
        """Record a serving, unheld host as visited this cycle without taking it (a
        ``checked`` entry): it had nothing pending and no health visit due."""
        ...

    def start_drain(self, name: str, actor: str) -> None:
        """Mark a cordoned host whose job still runs as draining (the scheduler places nothing)."""
        ...

    def ask_job(self, job_id: int, actor: str, evict_at_hours: float) -> JobAnswer:
        """Ask a job's owner before evicting it at ``evict_at_hours``."""
        ...

    def note_refusal(self, job_id: int, note: RefusalNote) -> None:
        """Remember that a running job refused and when to ask it again (until it ends or
        stops); the planner leaves its hosts alone till then."""
        ...

    def refusal_notes(self) -> Mapping[int, RefusalNote]:
        """job -> its standing refusal, for running jobs that refused a train."""
        ...

    def evict(self, job_id: int, actor: str) -> float:
        """Stop (requeue) a job so its cordoned hosts can be maintained; GPU-hours of work lost."""
        ...

    def prestage(self, name: str, targets: Mapping[str, str], actor: str) -> list[str]:
        """Download packages a host lacks while it stays in service; changes no state."""
        ...

    def begin_update(self, name: str, actor: str) -> bool:
        """Move a held host with no job into maintenance; False if it cannot be."""
        ...

    def begin_rollback(self, name: str, actor: str) -> bool:
        """Reopen a host whose new versions failed, to reinstall its previous ones."""
        ...

    def set_reimage(self, name: str, versions: dict[str, str], actor: str) -> bool:
        """Have a host out of service come back from repair on ``versions`` (under the
        recorded targets); False if it is not out of service or this backend cannot."""
        ...

    def reclaim(self, name: str, actor: str, reason: str) -> bool:
        """Take a host quarantined by a bad build (not by its own hardware) into ``actor``'s
        maintenance, to roll it back; False if it is not such a host or this backend cannot."""
        ...

    def install(
        self, name: str, targets: Mapping[str, str], actor: str, attempt: str
    ) -> InstallOutcome:
        """Install every pending component of ``targets`` in dependency order, one reboot."""
        ...

    def reboot(self, name: str, actor: str) -> None: ...

    def verify(self, name: str, targets: Mapping[str, str], actor: str) -> Verification: ...

    def health_check(self, name: str, actor: str) -> Verification:
        """Diagnostics and bandwidth of a held host before its change (recorded, no state
        change), so a defect it already had is not blamed on the change."""
        ...

    def change_failure_rate(self, components: Iterable[str]) -> float:
        """The fleet's base rate: the chance a change of ``components`` fails on a healthy host."""
        ...

    def return_to_service(self, name: str, actor: str, visit: bool = True) -> bool:
        """Uncordon a verified host; ``visit`` records a train's visit."""
        ...

    def release(self, name: str, actor: str) -> None:
        """Uncordon a held host that was never touched (nothing to verify)."""
        ...

    def quarantine(self, name: str, actor: str, reason: str) -> None: ...

    def hand_to_repair(self, name: str, actor: str, reason: str) -> None: ...

    def close_owner(self, owner: str, actor: str, outcome: str = "") -> None:
        """Record that ``owner`` ended (with ``outcome``: succeeded, failed, ...) and holds
        nothing more."""
        ...

    def record(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        """Append an entry to the record (what was done or seen)."""
        ...

    def inject_fault(self, component: str, version: str, rate: float, actor: str) -> None:
        """Make ``component=version`` a bad build that leaves hosts bad with ``rate`` (tests,
        game days); a backend that runs real builds refuses (a permanent error)."""
        ...


class FleetShape(Protocol):
    """What callers read of a fleet's shape (the simulated fleet's preset; Slurm's own)."""

    @property
    def name(self) -> str: ...
    @property
    def clusters(self) -> int: ...
    @property
    def hosts_per_cluster(self) -> int: ...
    @property
    def hosts_per_rack(self) -> int: ...


class FleetBackend(Protocol):
    """A whole fleet: its clusters, its clock, one-transaction cluster sessions, its record,
    the shape and settings the command line shows, and the fleet-wide list of bad versions."""

    @property
    def speed(self) -> float:
        """Fleet hours per wall hour."""
        ...

    @property
    def seed(self) -> int:
        """The seed a simulated fleet draws from (0 for a real one)."""
        ...

    @property
    def outside_changes(self) -> bool:
        """Whether hosts change outside trainctl with nobody telling it (a real scheduler: a
        job ends, an operator resumes a node), so a waiting workflow must look again within
        a bounded wall time (``ClockInfo.outside_changes``)."""
        ...

    @property
    def preset(self) -> FleetShape: ...

    @property
    def read_only(self) -> bool:
        """Opened only to read: sessions must ``peek``, never write."""
        ...

    def close(self) -> None: ...

    def last_closed(self, prefix: str) -> tuple[float, str, str] | None:
        """The latest recorded end of an owner named ``prefix...``: (fleet hour, owner,
        cluster), or None."""
        ...

    def get_meta(self) -> dict[str, str]:
        """The fleet file's settings (``fleet_id``, ``backend``, ...)."""
        ...

    def switch_versions(self, cluster: str | None = None) -> dict[str, dict[str, int]]:
        """Switch firmware per switch kind: version -> switches (empty if none is managed)."""
        ...

    def bad_versions(self, include_cleared: bool = False) -> list[BadVersion]:
        """Versions marked bad fleet-wide, oldest mark first (cleared ones too if asked)."""
        ...

    def mark_bad(
        self, component: str, version: str, reason: str, by: str
    ) -> tuple[BadVersion, bool]:
        """Mark ``component=version`` bad; (its entry, True if it was not bad already)."""
        ...

    def clear_bad(self, component: str, version: str, reason: str, by: str) -> BadVersion:
        """Clear ``component=version``; LookupError if it is not marked bad."""
        ...

    @property
    def anchor_wall(self) -> datetime: ...

    def cluster_names(self) -> list[str]: ...

    def installable_components(self) -> frozenset[str] | None:
        """The components this backend can install (None: every one). A target outside them
        is refused before anything starts (``hooks.<component>``), never found out on a node."""
        ...

    def hosts_in(self, cluster: str) -> int: ...

    def failure_domains(self, cluster: str | None = None) -> dict[str, tuple[str, str]]:
        """Host -> (rack, zone), from the inventory (every cluster's when ``cluster`` is None)."""
        ...

    def fleet_time(self, wall: datetime | None = None, cluster: str | None = None) -> float:
        """Fleet hours of ``cluster`` at the caller's ``wall`` (its workflow.now()), derived from
        ``wall`` and the fleet's speed."""
        ...

    def cluster(
        self, name: str, wall: datetime | None = None
    ) -> AbstractContextManager[ClusterBackend]:
        """One cluster advanced to the caller's fleet time; changes commit on a clean exit."""
        ...

    def peek(self, name: str, wall: datetime | None = None) -> ClusterBackend:
        """The cluster advanced to the caller's fleet time, read-only (nothing is written)."""
        ...

    def records(
        self, since: int = 0, cluster: str | None = None
    ) -> Iterator[tuple[int, RecordEntry, str]]:
        """The append-only record in order: (sequence number, entry, cluster)."""
        ...


__all__ = [
    "BadVersion",
    "ClusterBackend",
    "FleetBackend",
    "FleetShape",
    "HostRecord",
    "InstallOutcome",
    "JobAnswer",
    "PiggybackClaim",
    "RecordEntry",
    "RefusalNote",
    "Verification",
]
