"""The maintenance-train spec (YAML or JSON, read by ``orchestrator.contracts.specs``): errors name
the field.

Only lower layers roll through a train; ``gpu_driver`` and ``cuda`` must stay identical across a
job, so a target for them is refused here and sent to ``trainctl ops``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.contracts.batch_policy import BatchPolicy
from orchestrator.contracts.models import (
    CapacityBudget,
    Count,
    DrainPolicy,
    DurationHours,
    check_targets,
    parse_duration_hours,
)
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.specs import load_spec
from orchestrator.contracts.version_checks import check_skew, check_supersedes

__all__ = [
    "DrainPolicy",
    "Rollout",
    "TrainSpec",
    "TrainChange",
    "check_train_change",
    "load_train_spec",
    "riding",
    "train_workflow_id",
]


#: The drain policies a train can run (``planning.train_plan`` says what each does).
POLICIES = ("job-aware", "rolling-serial", "drain-wait", "slurm-asap")


class Rollout(BaseModel):
    """A campaign's change handed to a train: ``targets`` on ``hosts`` only (None: every host).

    While some of those hosts lack the targets the train visits only them (the campaign's stage
    waits for them); the targets reach the cluster's recorded targets (what repair reimages a
    host with) only when the rollout covers every host, so a canary stays a canary.
    """

    model_config = ConfigDict(extra="forbid")

    #: The campaign riding the train and its stage.
    campaign: str
    stage: str
    #: component -> version this stage installs (lower layers only).
    targets: dict[str, str]
    hosts: list[str] | None = None
    #: component -> the train's own target this ride replaced because the campaign
    #: ``supersedes`` it; put back if the campaign ends without keeping its targets.
    superseded: dict[str, str] = Field(default_factory=dict)
    #: Hosts that failed (quarantined, or lost to repair) while getting these targets: the
    #: train never gives them the rollout again, and the campaign's gate counts them as failed
    #: whatever repair made of them since (train-rollout-failures).
    failed: list[str] = Field(default_factory=list)

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, v: object) -> dict[str, str]:
        if not isinstance(v, dict):
            raise ValueError("rollout.targets must map components to versions")
        return check_targets(v, allow_upper=False)


class TrainSpec(BaseModel):
    """What a train does to one cluster; fields may grow, these keep their meaning."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The cluster the train runs on (one train per cluster).
    cluster: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    #: Hosts taken into maintenance together (one domain), within the budget.
    domain_size: Count = Field(default=8, ge=1, le=10_000)
    #: How many hosts may be out of service: the availability floor and the maintenance budget.
    budget: CapacityBudget = Field(default_factory=CapacityBudget)
    #: component -> version every host should carry (os, bios, nic_firmware, ...); never
    #: gpu_driver or cuda, which `trainctl ops` changes on a job's hosts at once.
    targets: dict[str, str] = Field(default_factory=dict)
    #: How long running jobs get before eviction, and whether they are asked first.
    drain: DrainPolicy = Field(default_factory=DrainPolicy)
    #: Halt the train after this many hosts in a row fail their install or verification.
    halt_after_failures: Count = Field(default=3, ge=1)
    #: Halt the train when more than this share of the hosts visited this cycle failed
    #: (judged once a few hosts were visited).
    halt_failure_rate: float = Field(default=0.2, gt=0, le=1)
    #: Drain policy: job-aware, rolling-serial, drain-wait or slurm-asap.
    policy: str = "job-aware"
    #: The campaign that started this train (empty for a standing train).
    campaign: str = ""
    #: End the train after this many full visit cycles (none: run until stopped).
    stop_after_cycles: Count | None = Field(default=None, ge=1)
    #: Maintenance windows and blackouts in fleet time (``orchestrator.contracts.schedule_window``).
    schedule: Schedule | None = None
    #: Every host visited within this long (``7d``): status projects the current cycle's end and
    #: says whether it is on track; ``trainctl_cycle_off_track`` (an alert rule) when not.
    cycle_target_hours: DurationHours | None = Field(default=None, alias="cycle_target")
    #: A drained health visit (reboot and verification) of every host at least this often
    #: (``30d``) even with nothing pending; None (the default): hosts on their targets are only
    #: checked in place, never drained, and the train rests until something is pending.
    verify_every_hours: DurationHours | None = Field(default=None, alias="verify_every")
    #: No new domain within this long (``30m``) of the latest host the train returned to
    #: service (``orchestrator.execution.soak`` says what is exempt); None: no soak.
    soak_hours: DurationHours | None = Field(default=None, alias="soak")
    #: Domains that grow while they succeed (``orchestrator.contracts.batch_policy``), in place
    #: of a fixed ``domain_size`` (which then reads as the batch's ``max``).
    batch: BatchPolicy | None = None
    #: A campaign's stage riding this train (see ``Rollout``): the one field of trains from
    #: before several campaigns could ride at once (``rollouts``); still read, and still what
    #: a train a campaign starts is given.
    rollout: Rollout | None = None
    #: Every campaign's stage riding this train, one per campaign, in the order they arrived
    #: (a later one wins on a component both change): see ``riding``.
    rollouts: list[Rollout] = Field(default_factory=list)
    #: Visit only the rollout's hosts (a train a campaign started where none ran).
    rollout_only: bool = False
    #: Versions of a lower layer that may serve at once in the cluster (default 3: old,
    #: rolling, new); ``supersedes`` names older targets this one replaces. Checked at start.
    skew: dict[str, int] = Field(default_factory=dict)
    supersedes: dict[str, str] = Field(default_factory=dict)

    @field_validator("skew", mode="before")
    @classmethod
    def _skew(cls, v: object) -> dict[str, int]:
        return check_skew(v)

    @field_validator("supersedes", mode="before")
    @classmethod
    def _supersedes(cls, v: object) -> dict[str, str]:
        return check_supersedes(v)

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, v: object) -> dict[str, str]:
        if not isinstance(v, dict):
            raise ValueError("targets must map components to versions")
        return check_targets(v, allow_upper=False)

    @field_validator("cycle_target_hours", mode="before")
    @classmethod
    def _cycle_target(cls, v: object) -> float | None:
        if v is None:
            return None
        hours = parse_duration_hours(v, "cycle_target")
        if hours <= 0:
            raise ValueError("cycle_target: must be above 0 (e.g. 7d)")
        return hours

    @model_validator(mode="before")
    @classmethod
    def _batch_or_domain_size(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("batch"), dict):
            size, most = data.get("domain_size"), data["batch"].get("max", BatchPolicy().max)
            if size is not None and size != most:
                raise ValueError(
                    "batch: give batch or domain_size, not both (batch replaces domain_size)"
                )
            data = {**data, "domain_size": most}
        return data

    @field_validator("soak_hours", mode="before")
    @classmethod
    def _soak(cls, v: object) -> float | None:
        return None if v is None else parse_duration_hours(v, "soak")

    @field_validator("verify_every_hours", mode="before")
    @classmethod
    def _verify_every(cls, v: object) -> float | None:
        if v is None:
            return None
        hours = parse_duration_hours(v, "verify_every")
        if hours <= 0:
            raise ValueError("verify_every: must be above 0 (e.g. 30d)")
        return hours

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        if v not in POLICIES:
            raise ValueError(f"unknown policy {v!r} (known: {', '.join(POLICIES)})")
        return v

    @property
    def workflow_id(self) -> str:
        return train_workflow_id(self.cluster)

    def riding(self) -> list[Rollout]:
        """The campaigns' rollouts on this train, in arrival order, one per campaign."""
        return riding(self.rollout, self.rollouts)


def riding(rollout: Rollout | None, rollouts: list[Rollout]) -> list[Rollout]:
    """``rollout`` (the older single field) first, then ``rollouts``; one per campaign, a
    campaign's later rollout taking its earlier one's place."""
    by_campaign: dict[str, Rollout] = {}
    for r in ([rollout] if rollout is not None else []) + list(rollouts):
        by_campaign[r.campaign] = r
    return list(by_campaign.values())


def train_workflow_id(cluster: str) -> str:
    """Stable id of a cluster's train: one train per cluster, no '/' (UI deep links)."""
    return f"train-{cluster}"


def load_train_spec(path: Path | str) -> TrainSpec:
    """Read a train spec (YAML or JSON); SpecError (a ValueError) naming the field."""
    return load_spec(path, TrainSpec, what="train spec")


class TrainChange(BaseModel):
    """A live change: any field left out stays as it is.

    Strict about its shape, since it arrives from outside a running train: an unknown field
    (a typo such as ``domain_sise``) is refused rather than ignored, and a boolean is no count.
    """

    model_config = ConfigDict(extra="forbid")

    domain_size: int | None = Field(default=None, ge=1, le=10_000)
    budget: CapacityBudget | None = None
    targets: dict[str, str] | None = None
    halt_after_failures: int | None = Field(default=None, ge=1)
    #: A campaign's stage to ride this train (replaces that campaign's earlier one; other
    #: campaigns' rollouts stay).
    rollout: Rollout | None = None
    #: Drop the campaign's rollout (the campaign ended or moved its targets into ``targets``).
    clear_rollout: bool = False
    #: Whose rollout ``clear_rollout`` drops (a ``Rollout.campaign``); empty: every one.
    rollout_campaign: str = ""

    @field_validator("domain_size", "halt_after_failures", mode="before")
    @classmethod
    def _no_boolean(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError(f"must be a whole number, not a boolean ({v!r})")
        return v


def check_train_change(change: TrainChange, hosts_total: int, phase: str) -> None:
    """Refuse a ``train reconfigure`` change (ValueError naming the field); the update's validator.

    A budget is held to the same rule as a spec's (``CapacityBudget.require_hosts``), once the
    train knows its cluster's size.
    """
    if change.targets is not None:
        check_targets(change.targets, allow_upper=False)
    if change.budget is not None and hosts_total:
        change.budget.require_hosts(hosts_total)
    if phase in ("stopping", "stopped"):
        raise ValueError("the train is stopping")
