"""The maintenance-train spec (YAML), validated so that bad input names its field.

Only lower layers roll through a train; ``gpu_driver`` and ``cuda`` must stay identical across a
job, so a target for them is refused here and sent to ``trainctl ops``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.models import CapacityBudget, check_targets, parse_duration_hours
from orchestrator.planning.train_plan import POLICIES


class DrainPolicy(BaseModel):
    """How long to wait for running jobs before evicting them (right after a checkpoint)."""

    model_config = ConfigDict(extra="forbid")

    max_wait_hours: float = Field(default=4.0, alias="max_wait")

    @field_validator("max_wait_hours", mode="before")
    @classmethod
    def _max_wait(cls, v: object) -> float:
        return parse_duration_hours(v, "drain.max_wait")


class TrainSpec(BaseModel):
    """What a train does to one cluster; fields may grow, these keep their meaning."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    cluster: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    domain_size: int = Field(default=8, ge=1, le=10_000)
    budget: CapacityBudget = Field(default_factory=CapacityBudget)
    targets: dict[str, str] = Field(default_factory=dict)
    drain: DrainPolicy = Field(default_factory=DrainPolicy)
    halt_after_failures: int = Field(default=3, ge=1)
    halt_failure_rate: float = Field(default=0.2, gt=0, le=1)
    policy: str = "job-aware"
    campaign: str = ""
    stop_after_cycles: int | None = Field(default=None, ge=1)

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, v: object) -> dict[str, str]:
        if not isinstance(v, dict):
            raise ValueError("targets must map components to versions")
        return check_targets(v, allow_upper=False)

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        if v not in POLICIES:
            raise ValueError(f"unknown policy {v!r} (known: {', '.join(POLICIES)})")
        return v

    @property
    def workflow_id(self) -> str:
        return train_workflow_id(self.cluster)


def train_workflow_id(cluster: str) -> str:
    """Stable id of a cluster's train: one train per cluster, no '/' (UI deep links)."""
    return f"train-{cluster}"


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML (or JSON) mapping; errors name the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"spec: no such file {path}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"spec: {path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"spec: {path} must hold a mapping of fields")
    return data


def load_train_spec(path: Path) -> TrainSpec:
    return TrainSpec.model_validate(load_yaml(path))
