"""Messages of the fleet activities every maintenance owner shares (train domains, operation waves).

One pydantic model per message so that signatures can grow without breaking running workflows
(new fields get defaults). Fleet time is in hours; ``wall`` is the caller's ``workflow.now()``,
from which the fleet derives its own time, so workflow timers and the fleet share one clock.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from orchestrator.contracts.constants import LOGICAL_CLOCK


class ClockInfo(BaseModel):
    """How fleet time relates to workflow time: hours = (now - anchor) * speed / 3600.

    At speed ``max`` there is no such relation: every cluster has its own logical clock, which
    moves when the parties waiting on that cluster all wait (``AdvanceClockRequest``); ``cluster``
    names whose clock this is, so a wait needs nothing more than the ClockInfo.
    """

    speed: float  # 0.0 means 'max': a logical clock that waits advance explicitly
    anchor_wall: datetime
    hosts_total: int = 0
    cluster: str = ""
    #: Logical clocks: a party hears its turn by signal only, with no timer per wait; the
    #: cluster's train or operation watches for a lost turn instead (``ClockParty``). Set by a
    #: train or operation past its ``clock-quiet-waits`` patch and handed to its domains.
    quiet: bool = False
    #: The fleet changes outside trainctl unannounced (Slurm): a waiting train or operation
    #: looks again at least every ``MAX_POLL_WALL_SECONDS`` of wall time.
    outside_changes: bool = False

    @property
    def logical(self) -> bool:
        """A 'max'-speed fleet: fleet time moves only when the cluster's waiting parties let it."""
        return self.speed == LOGICAL_CLOCK


class FleetInfoRequest(BaseModel):
    cluster: str


class AdvanceClockRequest(BaseModel):
    """A party waits on its cluster's logical clock until ``target_hours`` (None: for nothing).

    ``party`` is the waiting workflow (its id), ``owner`` the campaign whose end removes it,
    ``parent`` the party that started it; ``epoch`` names this one wait (asking again with it
    only checks whether it is over). ``children`` (a train's running domains) and ``wakes``
    (parties whose wait ends now: a domain's parent after a batch) are applied first.
    """

    cluster: str
    target_hours: float | None = None
    party: str = ""
    owner: str = ""
    parent: str | None = None
    rank: int = 0
    epoch: str = ""
    children: list[str] | None = None
    wakes: list[str] = Field(default_factory=list)
    #: a check after a long silence: tell again every party whose turn came and is still
    #: acting (a turn's signal may have been lost with the worker that sent it)
    recheck: bool = False


class AdvanceClockResult(BaseModel):
    """The cluster's fleet hour, and whether the wait is over (else a ``ClockReleased`` comes)."""

    now: float
    released: bool = True
    #: no other party is on the cluster's clock: the caller may take its next turns inside its
    #: next step (the step's ``turn``) instead of asking the clock first
    alone: bool = False


#: A step carrying a ``turn`` its clock did not give yet (another party came): the step did
#: nothing; the party waits for the turn's ``fleet_clock`` signal and runs the step again.
CLOCK_TURN_PENDING = "ClockTurnPending"


#: The signal a party waiting on a logical clock receives when its turn comes (``ClockReleased``).
CLOCK_SIGNAL = "fleet_clock"


class ClockReleased(BaseModel):
    """Signal to a waiting party: its wait ``epoch`` is over at fleet hour ``now``; its turn."""

    party: str
    epoch: str
    now: float


class HostsRequest(BaseModel):
    cluster: str
    owner: str
    hosts: list[str]
    wall: datetime
    targets: dict[str, str] = Field(default_factory=dict)
    deadline_hours: float = 0.0
    policy: str = "job-aware"
    visit: bool = True
    reason: str = ""
    #: host -> its own reason, over ``reason`` (a quarantine saying why each host failed)
    reasons: dict[str, str] = Field(default_factory=dict)
    #: the logical clock's turn this step is the first act of (a party alone on its clock,
    #: issue 27): taken first, in the same activity; the step does nothing unless it is given
    turn: AdvanceClockRequest | None = None


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
    #: the look that follows, in the same activity (issue 27): its ``DrainStatus`` in ``look``
    look: HostsRequest | None = None
    #: the logical clock's turn this step is the first act of (a party alone on its clock,
    #: issue 27): taken first, in the same activity; the step does nothing unless it is given
    turn: AdvanceClockRequest | None = None


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
    look: HostsRequest | None = None  # as ``EvictRequest.look``
    #: a logical clock's turn to take first (``HostsRequest.turn``)
    turn: AdvanceClockRequest | None = None


class JobReply(BaseModel):
    """A job's answer: go, wait until ``until_hours``, or refuse (ask again then)."""

    answer: str
    until_hours: float | None = None
    reason: str = ""


class AskResult(BaseModel):
    fleet_hours: float
    #: job -> its answer (a job gone meanwhile, or on others' hosts, is left out)
    answers: dict[int, JobReply] = Field(default_factory=dict)
    look: DrainStatus | None = None  # the drain after the answers, when asked (``look``)


class SwitchRequest(BaseModel):
    """Update the rack switches above ``hosts`` (every host below each one drained) to
    ``version``."""

    cluster: str
    owner: str
    wall: datetime
    hosts: list[str]
    version: str
    #: a logical clock's turn to take first (``HostsRequest.turn``)
    turn: AdvanceClockRequest | None = None


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
    look: DrainStatus | None = None  # the drain after the evictions, when asked (``look``)


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
    """Where the cluster stands in the current visit cycle."""

    hosts_total: int = 0
    visited: int = 0
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
