"""The simulated cluster's records: hosts, jobs and cluster-wide state, as plain dataclasses.

These are what ``SqliteFleet`` stores row by row and what ``build_cluster`` creates; ``ClusterSim``
(``cluster_sim``) and its parts only change their fields. They live apart from the behaviour so
that persistence and building can name the shapes without pulling in the scheduler, the failure
model or the maintenance operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.job_comment import DEFAULT_MAX_QUIET_HOURS
from orchestrator.contracts.views import JobView, last_checkpoint, next_checkpoint
from orchestrator.fleet.sim_index import HOST_WATCHED, JOB_WATCHED


@dataclass
class HostRec:
    name: str
    zone: str
    rack: str
    state: str
    #: shared by the loaded hosts with the same versions (``ledger_rows.load_hosts``): assign
    #: a new dict (``h.versions = {**h.versions, c: v}``), never change it in place
    versions: dict[str, str]
    job_id: int | None = None
    reason: str = ""
    owner: str = ""
    repair_until: float | None = None
    defect: str | None = None
    last_visit: float | None = None
    verified: bool = False
    updates: int = 0
    last_boot: float | None = None  # fleet hour of its last (re)boot, if known

    def __setattr__(self, name: str, value: object) -> None:
        # The cluster's index (``sim_index``) follows every write of the fields it reads.
        index = self.__dict__.get("_index")
        if index is None or name not in HOST_WATCHED:
            object.__setattr__(self, name, value)
            return
        if name == "job_id":  # the scheduler's placements and releases: most writes
            old = self.job_id
            object.__setattr__(self, name, value)
            index.job_id_changed(self, old)
            return
        index.host_write(self, name, value)


@dataclass
class JobRec:
    id: int
    size: int
    work_hours: float  # remaining work when (re)started
    ckpt_hours: float
    submitted: float
    hosts: list[str] = field(default_factory=list)
    start: float | None = None
    driver: str = ""
    cuda: str = ""
    state: str = "queued"  # queued | running | done
    interruptions: int = 0

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name in JOB_WATCHED:
            index = self.__dict__.get("_index")
            if index is not None:
                index.job_changed(self, name)

    @property
    def end(self) -> float:
        assert self.start is not None
        return self.start + self.work_hours

    def last_checkpoint(self, now: float) -> float:
        assert self.start is not None
        return last_checkpoint(self.start, self.ckpt_hours, now, self.end)

    def next_checkpoint(self, now: float) -> float:
        assert self.start is not None
        return next_checkpoint(self.start, self.ckpt_hours, now, self.end)

    def view(self, now: float) -> JobView:
        return JobView(
            self.id,
            self.size,
            tuple(self.hosts),
            self.end,
            self.next_checkpoint(now),
            self.last_checkpoint(now),
        )


@dataclass
class ClusterState:
    now: float = 0.0
    job_seq: int = 0
    fail_seq: int = 0
    next_failure_at: float = 0.0
    queue: list[int] = field(default_factory=list)
    targets: dict[str, str] = field(default_factory=dict)
    #: "component=version" -> probability that installing it leaves a host bad (a bad build)
    faults: dict[str, float] = field(default_factory=dict)
    #: job id (as text) -> its pinned negotiation behaviour (``sim_negotiation.BEHAVIOURS``)
    job_behaviours: dict[str, str] = field(default_factory=dict)
    #: job id (as text) -> what the job says in the job grammar (``contracts.job_comment``;
    #: ``quiet_until=`` is the key a simulated job's owner sets), kept for the job's life
    job_comments: dict[str, str] = field(default_factory=dict)
    #: the longest quiet hours a job is granted after its start (``max_quiet``, hours)
    max_quiet_hours: float = DEFAULT_MAX_QUIET_HOURS
    #: a train's standing claim on freed due hosts (``sim_piggyback.PiggybackClaim``), or empty
    piggyback: dict[str, object] = field(default_factory=dict)
    #: job id (as text) -> [until_hours, refusals] (``backend.RefusalNote``)
    job_refusals: dict[str, list[float]] = field(default_factory=dict)
    #: host -> versions its reimage gives it on the way back from repair, under the recorded
    #: targets (a rolled-back build's previous versions for a host the repair pipeline holds)
    reimage: dict[str, dict[str, str]] = field(default_factory=dict)


#: One entry of the fleet's append-only record (the backend interface's shape).
Event = RecordEntry
