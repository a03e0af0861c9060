"""Messages of bulk-operation execution: workflow inputs, status, controls and activity calls.

One pydantic model per message, so signatures can grow (new fields get defaults). Host lists
travel per wave, never per operation, so payloads stay small on a 3,072-host cluster. Fleet
time is in hours; ``wall`` is the caller's ``workflow.now()``, from which the fleet derives its
own time (one clock). Both operation workflows continue as new before their histories grow
large; what they carry into the next run is the ``state`` of their input.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from orchestrator.contracts.approvals import ApprovalGate
from orchestrator.contracts.errors import OPERATION_ABORTED as _OPERATION_ABORTED
from orchestrator.contracts.errors import OPERATION_FAILED as _OPERATION_FAILED
from orchestrator.contracts.messages import ClockInfo, OwnerCost
from orchestrator.contracts.ops_spec import OperationSpec

ControlAction = Literal["pause", "resume", "abort"]
#: Final states of an operation or of one cluster of it.
FINAL_STATES = frozenset({"succeeded", "failed", "aborted"})
#: The error types an operation (and each cluster's part of it) ends with when it did not
#: succeed: the workflow closes Failed, the reason its message, the final status its details.
OPERATION_FAILED = _OPERATION_FAILED
OPERATION_ABORTED = _OPERATION_ABORTED


# ------------------------------------------------------------------ workflows
#: Continue as new past this many history events, even if the server has not suggested it
#: (as ``TrainInput`` does); a run may overshoot by one wave.
MAX_HISTORY_EVENTS = 8_000


class OperationInput(BaseModel):
    """Input of ``BulkOperation``: the spec, and how many clusters may run side by side."""

    spec: OperationSpec
    max_parallel_clusters: int = Field(default=4, ge=1, le=100)
    #: History bound of the operation and of each of its ``ClusterOperation`` children.
    max_history_events: int = Field(default=MAX_HISTORY_EVENTS, ge=100)
    #: Set when the operation continues as new: where the previous run stood.
    state: OperationState | None = None
    #: Started by a Temporal Schedule (``ops start --cron``): each run is its own operation,
    #: named by its workflow id (the schedule's id plus the instant it was due).
    scheduled: bool = False


class ClusterOpInput(BaseModel):
    """Input of ``ClusterOperation``: one cluster of an operation."""

    spec: OperationSpec
    operation_id: str
    cluster: str
    clock: ClockInfo
    max_history_events: int = Field(default=MAX_HISTORY_EVENTS, ge=100)
    #: Set when the cluster's operation continues as new: where the previous run stood.
    state: ClusterOpState | None = None


class OpControl(BaseModel):
    """Input of the pause/resume/abort updates."""

    reason: str = ""


class ClusterControl(BaseModel):
    """Signal from an operation to its per-cluster children."""

    action: ControlAction
    reason: str = ""


class ClusterProgress(BaseModel):
    """Where one cluster of an operation stands (its ``status`` query, and its result)."""

    cluster: str
    workflow_id: str = ""
    #: pending | planning | prestaging | waiting | draining | checking | updating | verifying |
    #: rolling_back | paused | succeeded | failed | aborted
    state: str = "pending"
    reason: str = ""
    waves_total: int = 0
    waves_done: int = 0
    wave_hosts: int = 0  # hosts of the wave in progress
    hosts_in_scope: int = 0
    already_done: int = 0
    hosts_changed: int = 0
    hosts_rolled_back: int = 0
    hosts_quarantined: int = 0
    hosts_deferred: int = 0  # out for repair: the change is recorded as a fleet target
    #: The deferred hosts by name: in repair when it last planned, and every host it took into
    #: a wave and lost to repair before changing it (``lost_to_repair``: deferred for good, never
    #: a failure; repair's reimage gives them the change).
    deferred_hosts: list[str] = Field(default_factory=list)
    lost_to_repair: list[str] = Field(default_factory=list)
    #: Hosts handed back untouched because their job refused, re-queued to a later wave.
    hosts_requeued: int = 0
    failures: int = 0
    jobs_interrupted: int = 0
    waiting_for: list[str] = Field(default_factory=list)
    fleet_hours: float = 0.0
    #: What the operation has cost this cluster's jobs, as its last wave read the record.
    cost: OwnerCost | None = None
    #: The fleet hour a wave last returned hosts to service (for the spec's ``soak``).
    last_return_hours: float | None = None
    #: With a ``batch`` policy: the next wave's size (None: ``start``), failed batches in a row,
    #: and the size each wave so far was asked to be (before rounding up to whole jobs).
    batch_size: int | None = None
    batch_failures_in_row: int = 0
    batch_sizes: list[int] = Field(default_factory=list)
    #: Fleet hour it began (its first plan): what a reboot counts as done from.
    started_hours: float | None = None
    #: The bad-build rule (when ``max_failures`` is left out): the hosts it counts as changed
    #: (healthy before their change), the fleet's base rate, the most failures that still
    #: mean bad hosts rather than a bad build, and its last verdict in words.
    gate_changed: int = 0
    base_rate: float = 0.0
    gate_threshold: int = 0
    gate_reason: str = ""
    hosts_failing_before: int = 0  # quarantined before their change: not counted against it
    #: Fleet hour it began waiting for room (outages filling the budget), None when it is not.
    room_wait_since: float | None = None
    #: The capacity arbiter's last grant (the hosts a wave may take), and why ``waves_total``
    #: was last re-planned (it is, only when that grant changes).
    granted_hosts: int | None = None
    plan_note: str = ""
    #: Every re-plan of ``waves_total`` with its reason, the latest last (at most 20).
    replans: list[str] = Field(default_factory=list)
    #: What the last plan was made with (requeued, failed and deferred hosts): a re-plan
    #: compares against it to say why.
    plan_basis: dict[str, int] = Field(default_factory=dict)


class ClusterOpState(BaseModel):
    """What a ``ClusterOperation`` carries into its next run, between two waves.

    It holds no cordoned host then; it may hold (or be queued for) the arbiter's exclusive
    grant, which stays with it because the arbiter knows holders by name and workflow id.
    """

    progress: ClusterProgress
    #: The cluster's targets before the operation: restored unless it succeeds.
    recorded_targets: dict[str, str | None] = Field(default_factory=dict)
    targets_set: bool = False  # the operation's targets are recorded in the fleet
    in_arbiter: bool = False  # holding or queued for the arbiter's exclusive grant
    paused: bool = False
    abort: str = ""  # why it is aborting, if it is
    idle: int = 0  # empty waves in a row (the waiting back-off)
    #: The planned waves not yet run, each its hosts (None: a run that cuts its own waves)
    planned: list[list[str]] | None = None


class OperationStatus(BaseModel):
    """What ``ops status`` prints and the operation's ``status`` query returns."""

    operation_id: str
    kind: str
    targets: dict[str, str]
    consistency: str
    #: running | paused | aborting | succeeded | failed | aborted
    state: str = "running"
    reason: str = ""
    waves_total: int = 0
    waves_done: int = 0
    hosts_changed: int = 0
    hosts_rolled_back: int = 0
    hosts_quarantined: int = 0
    hosts_deferred: int = 0
    jobs_interrupted: int = 0
    waiting_for: list[str] = Field(default_factory=list)
    clusters: dict[str, ClusterProgress] = Field(default_factory=dict)
    #: Approval gates of this run, waiting or decided (``contracts.approvals``).
    approvals: list[ApprovalGate] = Field(default_factory=list)


class OperationState(BaseModel):
    """What a ``BulkOperation`` carries into its next run (continue-as-new)."""

    status: OperationStatus
    clock: ClockInfo
    pending: list[str] = Field(default_factory=list)  # clusters not started yet, in order
    #: Clusters whose ClusterOperation still runs: the next run rejoins them by workflow id.
    running: list[str] = Field(default_factory=list)
    failed: str = ""  # the first cluster failure, which stops the others
    failure_told: bool = False  # the running clusters were told to abort because of it


# ----------------------------------------------------------------- activities
class OpsRequest(BaseModel):
    """An operation's view of one cluster at ``wall``."""

    spec: OperationSpec
    cluster: str
    owner: str  # the operation id: owner of its hosts in the fleet
    wall: datetime
    #: Fleet hour the cluster's operation began: a reboot is done where a host booted since.
    since_hours: float | None = None
    #: The arbiter's last grant: the rest is planned in waves of that size (None: the budget's).
    grant: int | None = None
    #: The planned waves not yet run ([]: plan them now; None: cut waves from the cluster as
    #: it is, as runs recorded before planned waves did): the view counts the waves they leave.
    planned: list[list[str]] | None = None


class CheckRequest(BaseModel):
    spec: OperationSpec
    wall: datetime


class OperationCheck(BaseModel):
    """The whole-scope plan, in figures: which clusters have hosts of the scope."""

    clusters: list[str]
    cluster_waves: dict[str, int] = Field(default_factory=dict)
    refused: str | None = None
    waves: int = 0
    hosts_total: int = 0
    hosts_to_change: int = 0
    estimated_duration_hours: float = 0.0


class ClusterPlanView(BaseModel):
    """The plan of the rest of one cluster, as of now (hosts of the next wave only)."""

    fleet_hours: float
    refused: str | None = None
    #: Outages fill the budget now: why the next wave waits for room (never a refusal).
    waiting_for_room: str | None = None
    limit: int = 1  # hosts out of service the operation's budget (or window) allows
    hosts_in_scope: int = 0
    already_done: int = 0
    deferred: int = 0
    deferred_hosts: list[str] = Field(default_factory=list)  # the deferred ones by name
    returning: int = 0  # back from repair, awaiting our versions: taken by the next wave
    waves_left: int = 0
    next_wave: int = 0  # hosts of the next wave
    estimated_hours: float = 0.0
    #: The cluster's recorded targets for the spec's components before this operation.
    recorded_targets: dict[str, str | None] = Field(default_factory=dict)
    #: Asked with ``planned``: the waves still to run, each its hosts (``follow_planned``),
    #: and why their count differs from the planned waves', if it does.
    planned: list[list[str]] | None = None
    replan: str = ""

    @property
    def work_left(self) -> bool:
        return self.waves_left > 0 or self.returning > 0


class TargetsRequest(BaseModel):
    """Record ``targets`` in the fleet; None as a version forgets that component's target."""

    cluster: str
    owner: str
    wall: datetime
    targets: dict[str, str | None]


class TargetsResult(BaseModel):
    previous: dict[str, str | None] = Field(default_factory=dict)


class PrestageResult(BaseModel):
    hosts: int = 0
    fleet_hours: float = 0.0


class TakeWaveRequest(BaseModel):
    spec: OperationSpec
    cluster: str
    owner: str
    wall: datetime
    max_hold: int = Field(ge=1)  # the arbiter's grant
    since_hours: float | None = None  # as in ``OpsRequest``
    #: With a ``batch`` policy: the wave's size, rounded up to whole consistency groups
    batch: int | None = None
    #: The planned waves not yet run: the wave taken is the first of them still holding hosts
    #: to change (None: cut from the cluster as it is now)
    planned: list[list[str]] | None = None


class TakenWave(BaseModel):
    """Hosts cordoned for one wave, with each host's versions before the change."""

    fleet_hours: float
    hosts: list[str] = Field(default_factory=list)
    previous: dict[str, dict[str, str]] = Field(default_factory=dict)
    waves_left: int = 0  # including this one
    limit: int = 1
    waiting: str = ""  # why nothing was taken
    waiting_for: list[str] = Field(default_factory=list)  # campaigns still holding hosts
    #: what the operation has cost the jobs of this cluster, from the record (None: not read)
    cost: OwnerCost | None = None
    #: With ``planned``: the planned waves the wave taken ran through (the first ones left)
    planned_done: int = 0


class VerifyRequest(BaseModel):
    """Verify hosts against ``targets`` (or each host's own ``per_host`` versions)."""

    cluster: str
    owner: str
    wall: datetime
    hosts: list[str]
    targets: dict[str, str] = Field(default_factory=dict)
    per_host: dict[str, dict[str, str]] = Field(default_factory=dict)
    return_passed: bool = False
    quarantine_failed: bool = False
    reason: str = ""


class RollbackRequest(BaseModel):
    cluster: str
    owner: str
    wall: datetime
    previous: dict[str, dict[str, str]]  # host -> component -> version to reinstall
