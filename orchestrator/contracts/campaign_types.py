"""Messages of the ``Campaign`` workflow and its activities: input, state, status, requests.

One pydantic model per message, so that signatures can grow (new fields get defaults). The
campaign's whole state is one model (``CampaignState``), carried across continue-as-new.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from orchestrator.contracts.approvals import ApprovalGate
from orchestrator.contracts.campaign_spec import CampaignSpec, Gates
from orchestrator.contracts.messages import OwnerCost
from orchestrator.contracts.schedule_window import Schedule

#: Top-level states: succeeded | failed | held | rolling_back | rolled_back | running | paused |
#: aborted.
FINAL_STATES = ("succeeded", "failed", "rolled_back", "aborted")


class Blame(BaseModel):
    """One suspect, as campaign status shows it."""

    component: str
    version: str
    campaign: str | None = None  # the rollout in flight that installs it, if any
    failing: int  # failing hosts that carry it
    passing: int  # passing hosts that carry it
    score: float  # F1 of "carries it" as a predictor of "failed", in [0, 1]


class StagePlanModel(BaseModel):
    """A stage resolved against the fleet (``planning.campaign_plan.StagePlan``)."""

    name: str
    clusters: list[str]
    hosts_per_cluster: dict[str, int]
    partial: bool
    bake_hours: float
    parallel: int
    gates: Gates
    #: The fleet's base rate of hosts failing around this change (its components' fault
    #: rates, from the backend): what the bad-build rule judges the stage's failures against.
    base_rate: float = 0.02


class ClusterStage(BaseModel):
    """One cluster of a stage: its hosts (None: all), what the campaign counts there."""

    cluster: str
    state: str = "pending"  # pending | rolling | upgrading | baking | done | failed
    hosts: list[str] | None = None
    baseline_out: list[str] = Field(default_factory=list)  # already down when the stage began
    in_scope: int = 0
    changed: int = 0
    attempted: int = 0  # changed, or failed on the way
    pending: int = 0
    in_flight: int = 0
    failed: dict[str, str] = Field(default_factory=dict)  # host -> why (quarantine, repair)
    #: The stage's targets marked bad fleet-wide (component -> version), from the looks.
    marked_bad: dict[str, str] = Field(default_factory=dict)
    fleet_hours: float = 0.0
    done_hours: float | None = None
    started_train: bool = False
    operation_id: str = ""
    reason: str = ""
    #: What the campaign and its operations have cost this cluster's jobs, at the last look.
    cost: OwnerCost | None = None


class StageStatus(BaseModel):
    name: str
    state: str = "pending"  # pending | running | baking | held | passed | failed | skipped
    clusters: dict[str, ClusterStage] = Field(default_factory=dict)
    hosts_planned: int = 0
    hosts_changed: int = 0
    failures: int = 0
    failure_limit: int | None = None  # the gate's limit now (explicit, or the base-rate rule's)
    gate: str = ""  # the gate's verdict in plain words
    bake_hours: float = 0.0
    bake_remaining_hours: float | None = None
    reason: str = ""


class CampaignStatus(BaseModel):
    """What ``campaign status`` shows and the ``status`` query returns."""

    campaign_id: str
    name: str
    targets: dict[str, str]
    state: str = "running"
    reason: str = ""
    stage: str = ""
    stages: list[StageStatus] = Field(default_factory=list)
    hosts_changed: int = 0
    hosts_quarantined: int = 0
    hosts_rolled_back: int = 0
    #: The hosts rolled back, per cluster (cluster -> count; they add up to hosts_rolled_back).
    rolled_back_per_cluster: dict[str, int] = Field(default_factory=dict)
    #: When a stage failed: the component=version pairs that best explain its failures, best
    #: first (``planning.blame``); the top one, if it is this campaign's, is marked bad.
    blame: list[Blame] = Field(default_factory=list)
    #: Held because blame named one of its versions (``on_failure: hold``): waits for an
    #: operator, so ``campaign start --wait`` returns (exit 1) instead of waiting for the end.
    held_on_blame: bool = False
    #: Approval gates so far, waiting or decided (``contracts.approvals``).
    approvals: list[ApprovalGate] = Field(default_factory=list)


class CampaignState(BaseModel):
    """Everything the campaign carries across continue-as-new."""

    status: CampaignStatus
    plan: list[StagePlanModel]
    stage_index: int = 0
    paused: bool = False
    abort: str = ""
    trains_started: list[str] = Field(default_factory=list)  # clusters whose train we started
    trains_paused: list[str] = Field(default_factory=list)  # trains our pause paused
    #: component -> version of ours that blame named for the failed stage (marked bad).
    blamed: dict[str, str] = Field(default_factory=dict)
    withdrawn: bool = False  # trains and operations already told we are done


class CampaignInput(BaseModel):
    spec: CampaignSpec
    state: CampaignState | None = None
    #: Wall seconds between looks at a stage's progress.
    poll_seconds: float = Field(default=1.0, gt=0, le=600)
    #: Continue as new past this many history events (or when the server suggests it).
    max_history_events: int = Field(default=8_000, ge=50)


class CampaignControl(BaseModel):
    reason: str = ""


# --------------------------------------------------------------------------- activities
class PlanRequest(BaseModel):
    spec: CampaignSpec


class StageHostsRequest(BaseModel):
    """Choose a stage's hosts in a cluster and note which are down already."""

    cluster: str
    count: int | None  # None: every host
    targets: dict[str, str]
    wall: datetime


class StageHosts(BaseModel):
    hosts: list[str] | None
    baseline_out: list[str] = Field(default_factory=list)
    in_scope: int = 0


class ProgressRequest(BaseModel):
    cluster: str
    campaign: str = ""  # for the metrics
    stage: str = ""
    hosts: list[str] | None
    baseline_out: list[str] = Field(default_factory=list)
    targets: dict[str, str]
    wall: datetime
    #: the owners whose cost to this cluster's jobs the look reads from the record: the
    #: campaign and the operations it ran there
    owners: list[str] = Field(default_factory=list)


class Progress(BaseModel):
    in_scope: int = 0
    changed: int = 0  # hosts of the scope that run every target
    attempted: int = 0  # changed, or failed on the way (the gate's sample)
    pending: int = 0  # in-service hosts of the scope still to change
    in_flight: int = 0  # held in maintenance by anyone
    failed: dict[str, str] = Field(default_factory=dict)
    fleet_hours: float = 0.0
    #: Failed hosts carrying a version another rollout got marked bad: not this stage's.
    excused: int = 0
    #: The stage's targets marked bad fleet-wide (component -> version): it cannot pass.
    marked_bad: dict[str, str] = Field(default_factory=dict)
    #: What the campaign and its operations have cost this cluster's jobs (None: not read).
    cost: OwnerCost | None = None

    @property
    def complete(self) -> bool:
        return self.pending == 0 and self.in_flight == 0


class TrainHandoff(BaseModel):
    """Hand a stage's lower-layer targets to a cluster's train (starting one if none runs)."""

    campaign: str
    cluster: str
    stage: str = ""
    targets: dict[str, str] = Field(default_factory=dict)
    hosts: list[str] | None = None
    domain_size: int = 8
    budget: dict[str, object] = Field(default_factory=dict)
    #: The campaign's ``train.drain`` for a train it starts (None: the train's default).
    drain: dict[str, object] | None = None
    #: end: drop the rollout (``keep`` moves its targets into the train's own first);
    #: stop: stop the train (one we started); resume: resume it if halted or paused by us.
    action: str = "ride"  # ride | end | keep | stop | pause | resume
    reason: str = ""
    #: The campaign's windows, for a train it starts (a running train keeps its own).
    schedule: Schedule | None = None
    #: The campaign's ``supersedes``: a running train whose own target is the superseded
    #: version gets the campaign's instead when the ride covers its whole cluster.
    supersedes: dict[str, str] = Field(default_factory=dict)


class TrainAnswer(BaseModel):
    started: bool = False
    state: str = ""
    reason: str = ""


class PromQuery(BaseModel):
    """One look at the gate's Prometheus. Never a password: the activity reads it from
    ``password_file`` (a path on the worker) or ``$TRAINCTL_PROMETHEUS_PASSWORD``."""

    url: str
    query: str
    username: str | None = None
    password_file: str | None = None


class PromAnswer(BaseModel):
    firing: int = 0  # series in the answer
    sample: list[str] = Field(default_factory=list)  # a few of them, for the status
    error: str = ""


class CampaignReport(BaseModel):
    """What the campaign last reported for its metrics (``trainctl_campaign_*``)."""

    campaign: str
    state: str
    stage: str = ""
    failure_limit: int | None = None
    hosts_changed: int = 0
    hosts_quarantined: int = 0
    hosts_rolled_back: int = 0
    held_on_blame: bool = False
    approvals_waiting: list[ApprovalGate] = Field(default_factory=list)


class BakeClockRequest(BaseModel):
    """Read a cluster's fleet hour while a bake waits for its end."""

    cluster: str
    target_hours: float


class BlameRequest(BaseModel):
    """Name the change behind a failed stage, and mark it bad fleet-wide if it is ours."""

    campaign: str  # its name
    stage: str
    targets: dict[str, str]
    clusters: list[ClusterStage]
    wall: datetime


class BlameResult(BaseModel):
    blame: list[Blame] = Field(default_factory=list)
    marked: list[str] = Field(default_factory=list)  # component=version marked bad by this call
    #: The top suspect when it is ours and explains the failures (marked bad, now or before).
    blamed: dict[str, str] = Field(default_factory=dict)


class RollbackPlanRequest(BaseModel):
    """Find the hosts of ``clusters`` carrying a blamed version, and what they had before."""

    campaign: str  # its workflow id: who records the change of targets
    clusters: list[str]
    blamed: dict[str, str]
    wall: datetime


class RollbackGroup(BaseModel):
    """In-service hosts going back to the same versions: one bulk operation."""

    targets: dict[str, str]
    hosts: list[str]


class ClusterRollback(BaseModel):
    cluster: str
    groups: list[RollbackGroup] = Field(default_factory=list)
    #: Hosts the bad build took out of service: host -> versions to reinstall.
    reclaim: dict[str, dict[str, str]] = Field(default_factory=dict)
    unknown: list[str] = Field(default_factory=list)  # previous version not in the record


class RollbackPlan(BaseModel):
    clusters: list[ClusterRollback] = Field(default_factory=list)


class ReclaimRequest(BaseModel):
    """Reclaim hosts a bad build took out of service and reinstall their previous versions."""

    cluster: str
    owner: str
    wall: datetime
    previous: dict[str, dict[str, str]]
    reason: str = ""


class ReclaimResult(BaseModel):
    updated: list[str] = Field(default_factory=list)  # reinstalled, to verify
    failed: dict[str, str] = Field(default_factory=dict)  # reinstall failed: quarantined again
    left: dict[str, str] = Field(default_factory=dict)  # not reclaimed, and why
    fleet_hours: float = 0.0
    duration_hours: float = 0.0
