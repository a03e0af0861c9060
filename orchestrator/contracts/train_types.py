"""Inputs and results of the train's workflows, its own activities, queries and updates.

One pydantic model per message so that signatures can grow without breaking running workflows
(new fields get defaults). Fleet time is in hours; ``wall`` is the caller's ``workflow.now()``,
from which the fleet derives its own time, so workflow timers and the fleet share one clock.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from orchestrator.contracts.arbiter_types import AcquireRequest, Grant
from orchestrator.contracts.messages import (
    ClockInfo,
    CycleCounts,
    OwnerCost,
)
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.train_spec import Rollout, TrainSpec
from orchestrator.contracts.train_spec import (
    TrainChange as TrainChange,  # importable here too, where it lived
)


class PlanDomainRequest(BaseModel):
    """Ask the fleet for the next hosts to take, and cordon them in the same transaction."""

    cluster: str
    owner: str
    wall: datetime
    cycle_started_hours: float
    max_held: int  # hosts this owner may hold at once (domain size, or the arbiter's grant)
    budget: CapacityBudget
    max_wait_hours: float
    policy: str = "job-aware"
    targets: dict[str, str] = Field(default_factory=dict)
    in_flight: list[str] = Field(default_factory=list)
    cycle_target_hours: float | None = None  # the spec's cycle_target: the projection's gauge
    rollout: Rollout | None = None  # a train from before ``rollouts`` (still honoured)
    #: Every campaign's rollout riding the train, in arrival order (``TrainSpec.riding``).
    rollouts: list[Rollout] = Field(default_factory=list)
    rollout_only: bool = False
    #: The fleet takes freed hosts for this train (piggybacking) until this fleet hour at the
    #: latest: its maintenance window closes then (None: no window).
    claim_until_hours: float | None = None
    #: apply the visit rule (``planning.resting``): check hosts with nothing to do in place
    visit_rule: bool = False
    #: the train's last cycle is complete: start the next only if a host needs a visit
    resting: bool = False
    #: the spec's ``verify_every`` (a drained health visit at least this often)
    verify_every_hours: float | None = None


class PlanDomainResult(BaseModel):
    hosts: list[str] = Field(default_factory=list)
    #: What these hosts get, when not the train's own targets (a campaign's rollout).
    targets: dict[str, str] | None = None
    waiting: str = ""
    retry_at_hours: float | None = None  # the planner wants another look at this fleet hour
    limit: int = 0
    counts: CycleCounts = Field(default_factory=CycleCounts)
    #: the arbiter's grant the plan was cut to (``plan_granted_domain``)
    grant: Grant | None = None
    #: campaign -> why its riding rollout gave this domain nothing (a version marked bad)
    held_back: dict[str, str] = Field(default_factory=dict)
    #: hosts recorded as visited in place (nothing pending, no health visit due)
    checked: list[str] = Field(default_factory=list)
    #: nothing needs a drained visit: the train rests (its next cycle not started)
    resting: bool = False
    #: while resting, when the first health visit falls due (None: only a change wakes it)
    rest_until_hours: float | None = None
    #: a resting train's next cycle began at this fleet hour, in this plan
    cycle_started_hours: float | None = None
    #: what the train has cost the jobs so far, from the fleet's record (None: not read)
    cost: OwnerCost | None = None


class PlanGrantedRequest(BaseModel):
    """Ask the arbiter (``acquire``), then plan up to ``plan.max_held`` and the grant."""

    acquire: AcquireRequest
    plan: PlanDomainRequest


class DomainInput(BaseModel):
    cluster: str
    owner: str
    domain_id: str
    hosts: list[str]
    targets: dict[str, str]
    max_wait_hours: float
    policy: str = "job-aware"
    clock: ClockInfo
    visit: bool = True
    #: ask each job before evicting it (``drain.negotiate``), honouring this many refusals
    negotiate: bool = False
    max_refusals: int = 2
    #: the fleet hour of its plan: the domain's deadline counts from it (None: from its first
    #: look)
    start_hours: float | None = None
    #: the train's ``cycle_target`` (hours): cuts a job's quiet hours short at its host's
    #: deadline (``planning.quiet``)
    cycle_target_hours: float | None = None


class DomainResult(BaseModel):
    domain_id: str
    returned: list[str] = Field(default_factory=list)
    quarantined: dict[str, str] = Field(default_factory=dict)
    lost_to_repair: dict[str, str] = Field(default_factory=dict)
    released: list[str] = Field(default_factory=list)
    outcomes: list[bool] = Field(default_factory=list)  # per host, in completion order: passed?
    #: the last batch's outcomes, told by this result instead of a signal
    untold: list[bool] = Field(default_factory=list)
    jobs_interrupted: int = 0
    lost_gpu_hours: float = 0.0


class DomainProgress(BaseModel):
    """A domain's batch of hosts is done: passed (returned) or failed (quarantined), in order."""

    domain_id: str
    outcomes: list[bool] = Field(default_factory=list)
    #: job -> its negotiation in one line; set on a negotiation-only message (no outcomes)
    negotiations: dict[str, str] | None = None
    #: hosts the domain handed back untouched because their job refused (no longer its own)
    released: list[str] = Field(default_factory=list)
    #: hosts a cancelled (or failed) domain verified and returned as it handed back: visits
    #: its result, which the train never gets, would have carried (domain-hand-back-visits)
    visited: list[str] = Field(default_factory=list)


class TrainState(BaseModel):
    """Everything a train carries across continue-as-new."""

    cycle: int = 0
    cycles_completed: int = 0
    cycle_started_hours: float = 0.0
    cycle_started_wall: datetime | None = None
    phase: str = "running"  # running | paused | halted | stopping | stopped
    reason: str = ""
    failures_in_a_row: int = 0
    cycle_visits: int = 0
    cycle_failures: int = 0
    visits_total: int = 0
    quarantined_total: int = 0
    jobs_interrupted: int = 0
    lost_gpu_hours: float = 0.0
    domains_started: int = 0
    last_cycle_fleet_hours: float = 0.0
    last_cycle_wall_seconds: float = 0.0
    waiting: str = ""
    retry_at_hours: float | None = None
    counts: CycleCounts = Field(default_factory=CycleCounts)
    #: With a ``schedule``: open | waiting | blackout, and the next edge (fleet datetimes).
    window_state: str = ""
    next_window_start: datetime | None = None
    window_closes_at: datetime | None = None
    #: domain -> job -> its negotiation (question, answer, wait) while the domain drains
    negotiations: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: The latest hosts that failed (host -> why), newest last, at most ``RECENT_FAILURES``:
    #: what a halted train names (the same host failing three times says "bad host").
    recent_failures: list[tuple[str, str]] = Field(default_factory=list)
    #: The last cycle is complete and no host needs a drained visit: the next cycle starts
    #: when one does (``planning.resting``); until then the train takes nothing.
    resting: bool = False
    #: While resting: the fleet hour the first health visit falls due (None: only a change).
    rest_until_hours: float | None = None
    #: Hosts recorded as visited in place since this train started (nothing pending).
    checked_total: int = 0
    #: What the train has cost the jobs, as its last plan read it from the fleet's record.
    cost: OwnerCost | None = None
    #: The fleet hour the train last saw hosts it maintained come back (for ``soak``).
    last_return_hours: float | None = None
    #: With a ``batch`` policy: hosts in maintenance at once now (None: ``start``), and failed
    #: domains in a row.
    batch_size: int | None = None
    batch_failures_in_row: int = 0


#: Failures a train remembers for its status and page.
RECENT_FAILURES = 10


class TrainInput(BaseModel):
    spec: TrainSpec
    state: TrainState = Field(default_factory=TrainState)
    clock: ClockInfo | None = None
    #: Continue as new past this many history events, even if the server has not suggested it.
    max_history_events: int = Field(default=8_000, ge=100)


class TrainStatus(BaseModel):
    """What ``train status`` shows and the ``status`` query returns."""

    cluster: str
    state: str
    reason: str = ""
    #: The latest hosts that failed, newest last: [host, why] (TrainState.recent_failures).
    recent_failures: list[tuple[str, str]] = Field(default_factory=list)
    cycles_completed: int
    hosts_total: int
    #: Visited since the cycle began, whatever they are now: never drops within a cycle.
    hosts_visited_this_cycle: int
    in_maintenance: int
    quarantined: int
    in_repair: int = 0
    #: Of ``hosts_visited_this_cycle``, those now quarantined or in repair (so also counted in
    #: ``quarantined`` or ``in_repair``).
    hosts_visited_now_out: int = 0
    domain_size: int
    budget: CapacityBudget
    targets: dict[str, str]
    waiting: str = ""
    visits_total: int = 0
    jobs_interrupted: int = 0
    lost_gpu_hours: float = 0.0
    fleet_hours: float = 0.0
    last_cycle_fleet_hours: float = 0.0
    last_cycle_wall_seconds: float = 0.0
    cycle_target_hours: float | None = None
    cycle_projected_end_hours: float | None = None
    """Fleet hour the current cycle ends at its pace so far (``cycle.project_cycle_end``)."""
    cycle_started_hours: float | None = None
    """Fleet hour the current cycle began (None: no cycle running)."""
    cycle_on_track: bool | None = None
    """Whether that projection meets ``cycle_target`` (None: no target or no pace yet)."""
    max_unavailable_hosts: int = 0
    maintenance_hosts: int = 0
    """The two limits as hosts of this cluster: the floor and the maintenance budget."""
    window_state: str = ""
    """With a ``schedule``: open, waiting (between windows) or blackout; "" without one."""
    next_window_start: datetime | None = None
    """While waiting: when (fleet time) the next window opens."""
    window_closes_at: datetime | None = None
    """While open: when (fleet time) this window closes."""
    time_zone: str = ""
    """The schedule's IANA time zone its windows are read in ("" without a schedule)."""
    rollout: Rollout | None = None
    #: Every campaign's rollout riding the train, in arrival order (``rollout``: the first).
    rollouts: list[Rollout] = Field(default_factory=list)
    #: A campaign's temporary train (visits only its rollouts' hosts): the last campaign to
    #: leave it stops it.
    rollout_only: bool = False
    #: job -> its negotiation with the train's draining domains (question, answer, wait)
    negotiations: dict[str, str] = Field(default_factory=dict)
    #: Every host is on its targets with no health visit due: no cycle runs, nothing is taken.
    resting: bool = False
    #: While resting: when (fleet hour) the first health visit falls due; None: only a change
    #: (new targets, a campaign's rollout, a host needing updates) starts the next cycle.
    rest_until_hours: float | None = None
    #: Hosts recorded as visited without a drain since the train started (nothing pending).
    checked_total: int = 0
    #: What the train has cost the jobs, as its last plan read it from the fleet's record
    #: (``train status`` reads the record again when it can).
    cost: OwnerCost | None = None


class ControlRequest(BaseModel):
    reason: str = ""
