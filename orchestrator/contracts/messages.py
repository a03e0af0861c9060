"""Messages of the fleet activities every maintenance owner shares (train domains, operation waves).

One pydantic model per message so that signatures can grow without breaking running workflows
(new fields get defaults). Fleet time is in hours; ``wall`` is the caller's ``workflow.now()``,
from which the fleet derives its own time, so workflow timers and the fleet share one clock.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, field_validator

from orchestrator.contracts.constants import LEGACY_MAX_SPEED, MAX_SPEED_FACTOR


class ClockInfo(BaseModel):
    """How fleet time relates to workflow time: hours = (now - anchor) * speed / 3600."""

    speed: float  # fleet seconds per wall second
    anchor_wall: datetime
    hosts_total: int = 0
    cluster: str = ""
    #: The fleet changes outside trainctl unannounced (Slurm): a waiting train or operation
    #: looks again at least every ``MAX_POLL_WALL_SECONDS`` of wall time.
    outside_changes: bool = False

    @field_validator("speed")
    @classmethod
    def _fastest_for_max(cls, speed: float) -> float:
        """An input carried since ``max`` had a speed of its own runs at the fastest one."""
        return MAX_SPEED_FACTOR if speed == LEGACY_MAX_SPEED else speed


class FleetInfoRequest(BaseModel):
    cluster: str


class HostsRequest(BaseModel):
    cluster: str
    owner: str
    hosts: list[str]
    wall: datetime
    targets: dict[str, str] = Field(default_factory=dict)
    deadline_hours: float = 0.0
    policy: str = "job-aware"
    visit: bool = True
    #: the train's ``cycle_target`` (hours): a host's last visit plus it is the deadline that
    #: may cut a job's quiet hours short (``planning.quiet``); None for operations
    cycle_target_hours: float | None = None
    reason: str = ""
    #: host -> its own reason, over ``reason`` (a quarantine saying why each host failed)
    reasons: dict[str, str] = Field(default_factory=dict)


class JobWait(BaseModel):
    """A job still running on cordoned hosts, and what the drain policy says to do about it."""

    job_id: int
    hosts: list[str]
    action: str  # wait_end | evict_after_checkpoint | evict_now
    at_hours: float
    #: when the policy stops the job once the deadline rules (negotiation's last word)
    final_hours: float | None = None
    #: refusals the job made to earlier visits that handed its hosts back
    #: (``backend.RefusalNote``): they count against this visit's ``max_refusals``
    refusals: int = 0
    #: the job's latest checkpoint (releasing drains: a job taken again right after it)
    last_checkpoint_hours: float | None = None
    #: no eviction before this fleet hour: the job's quiet hours (``planning.quiet``)
    quiet_until_hours: float | None = None
    #: its host's deadline cut the quiet hours short (the eviction is recorded as such)
    quiet_forced: bool = False


class DrainStatus(BaseModel):
    fleet_hours: float
    ready: list[str] = Field(default_factory=list)  # no job left: can be updated now
    lost: dict[str, str] = Field(default_factory=dict)  # host -> why it left our hands (repair)
    waits: list[JobWait] = Field(default_factory=list)


class EvictRequest(BaseModel):
    cluster: str
    owner: str
    job_ids: list[int]
    wall: datetime
    scheduled_hours: dict[int, float] = Field(default_factory=dict)  # job -> planned stop time


class AskRequest(BaseModel):
    """Ask the owners of jobs on our hosts before evicting them (job negotiation).

    ``planned`` is job -> the instant the drain would stop it; ``refusals`` what each job
    refused so far this visit (for the record of what its answer leads to)."""

    cluster: str
    owner: str
    wall: datetime
    planned: dict[int, float]
    deadline_hours: float
    max_refusals: int = 2
    refusals: dict[int, int] = Field(default_factory=dict)
    #: job -> when the deadline rules for it (``JobWait.final_hours``)
    finals: dict[int, float] = Field(default_factory=dict)
    #: the drain hands a refusing job's hosts back and asks later (``DrainTracker.release``):
    #: a refusal is noted with the fleet, and an earlier visit's refusals carry over
    release: bool = False


class JobReply(BaseModel):
    """A job's answer: go, wait until ``until_hours``, or refuse (ask again then)."""

    answer: str
    until_hours: float | None = None
    reason: str = ""


class AskResult(BaseModel):
    fleet_hours: float
    #: job -> its answer (a job gone meanwhile, or on others' hosts, is left out)
    answers: dict[int, JobReply] = Field(default_factory=dict)


class SwitchRequest(BaseModel):
    """Update the rack switches above ``hosts`` (every host below each one drained) to
    ``version``."""

    cluster: str
    owner: str
    wall: datetime
    hosts: list[str]
    version: str


class SwitchResult(BaseModel):
    fleet_hours: float
    #: rack -> '' when its switch is on ``version``, else why it was refused
    racks: dict[str, str] = Field(default_factory=dict)
    duration_hours: float = 0.0  # install and reboot of the switches updated now

    @property
    def done(self) -> bool:
        return not any(self.racks.values())


class EvictResult(BaseModel):
    interrupted: int = 0
    lost_gpu_hours: float = 0.0
    #: job -> the job's answer when it asked for more time (not evicted this time)
    deferred: dict[int, str] = Field(default_factory=dict)


class UpdateResult(BaseModel):
    """Hosts whose updates installed (with the fleet hours that took) and those that failed."""

    fleet_hours: float
    updated: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    duration_hours: float = 0.0
    #: host -> the component whose install failed (for metrics and blame)
    failed_components: dict[str, str] = Field(default_factory=dict)
    #: Of ``failed``, the hosts that left our hands before their install (repair took them):
    #: nothing was installed on them, and the change reaches them from repair.
    lost: dict[str, str] = Field(default_factory=dict)


class VerifyResult(BaseModel):
    returned: list[str] = Field(default_factory=list)
    quarantined: dict[str, str] = Field(default_factory=dict)
    #: Of ``returned``, the hosts a hand-back verified after work on them (visited), as
    #: opposed to those released untouched (``settle.hand_back``).
    visited: list[str] = Field(default_factory=list)


class CycleCounts(BaseModel):
    """Where the cluster stands in the current visit cycle.

    ``visited`` is the pace's figure (back in service after a visit, so each host counts once
    beside ``quarantined`` and ``in_repair``); ``visited_this_cycle`` is what pages show and
    never drops within a cycle: a visited host that goes to repair stays visited
    (``visited_now_out`` counts those, also in ``quarantined`` or ``in_repair``).
    """

    hosts_total: int = 0
    #: in service, not held by the train, visited since the cycle began
    visited: int = 0
    #: visited since the cycle began, whatever the host's state now
    visited_this_cycle: int = 0
    #: of ``visited_this_cycle``, the hosts now quarantined or in repair
    visited_now_out: int = 0
    quarantined: int = 0
    in_repair: int = 0
    in_flight: int = 0
    out_of_service: int = 0
    due: int = 0
    fleet_hours: float = 0.0


class VerifyOutcome(BaseModel):
    """Hosts verified (and returned, if asked) and hosts that failed, with why."""

    passed: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)


class OwnerCost(BaseModel):
    """What one owner cost the jobs, read from the fleet's record (``telemetry.cost_ledger``)."""

    parts: dict[str, float] = Field(default_factory=dict)
    total_gpu_hours: float = 0.0
    jobs_stopped: int = 0
    #: what its stops cost the jobs it stopped, in points of their ETTR
    ettr_points_lost: float = 0.0
