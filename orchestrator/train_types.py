"""Inputs and results of the train's workflows, activities, queries and updates.

One pydantic model per message so that signatures can grow without breaking running workflows
(new fields get defaults). Fleet time is in hours; ``wall`` is the caller's ``workflow.now()``,
from which the fleet derives its own time, so workflow timers and the fleet share one clock.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from orchestrator.models import CapacityBudget
from orchestrator.train_spec import TrainSpec


class ClockInfo(BaseModel):
    """How fleet time relates to workflow time: hours = (now - anchor) * speed / 3600."""

    speed: float  # 0.0 means 'max': a logical clock that waits advance explicitly
    anchor_wall: datetime
    hosts_total: int = 0


class FleetInfoRequest(BaseModel):
    cluster: str


class AdvanceClockRequest(BaseModel):
    target_hours: float


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


class PlanDomainResult(BaseModel):
    hosts: list[str] = Field(default_factory=list)
    waiting: str = ""
    retry_at_hours: float | None = None  # the planner wants another look at this fleet hour
    limit: int = 0
    counts: CycleCounts = Field(default_factory=CycleCounts)


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


class JobWait(BaseModel):
    """A job still running on cordoned hosts, and what the drain policy says to do about it."""

    job_id: int
    hosts: list[str]
    action: str  # wait_end | evict_after_checkpoint | evict_now
    at_hours: float


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


class EvictResult(BaseModel):
    interrupted: int = 0
    lost_gpu_hours: float = 0.0


class UpdateResult(BaseModel):
    """Hosts whose updates installed (with the fleet hours that took) and those that failed."""

    fleet_hours: float
    updated: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    duration_hours: float = 0.0


class VerifyResult(BaseModel):
    returned: list[str] = Field(default_factory=list)
    quarantined: dict[str, str] = Field(default_factory=dict)


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


class DomainResult(BaseModel):
    domain_id: str
    returned: list[str] = Field(default_factory=list)
    quarantined: dict[str, str] = Field(default_factory=dict)
    lost_to_repair: dict[str, str] = Field(default_factory=dict)
    released: list[str] = Field(default_factory=list)
    outcomes: list[bool] = Field(default_factory=list)  # per host, in completion order: passed?
    jobs_interrupted: int = 0
    lost_gpu_hours: float = 0.0


class DomainProgress(BaseModel):
    """A domain's batch of hosts is done: passed (returned) or failed (quarantined), in order."""

    domain_id: str
    outcomes: list[bool] = Field(default_factory=list)


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
    cycles_completed: int
    hosts_total: int
    hosts_visited_this_cycle: int
    in_maintenance: int
    quarantined: int
    in_repair: int = 0
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


class TrainChange(BaseModel):
    """A live change: any field left out stays as it is."""

    domain_size: int | None = Field(default=None, ge=1, le=10_000)
    budget: CapacityBudget | None = None
    targets: dict[str, str] | None = None
    halt_after_failures: int | None = Field(default=None, ge=1)


class ControlRequest(BaseModel):
    reason: str = ""
