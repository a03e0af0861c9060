"""Messages of the capacity arbiter: the one owner of each cluster's maintenance budget."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from orchestrator.contracts.constants import TASK_QUEUE as DEFAULT_TASK_QUEUE


def arbiter_workflow_id(cluster: str, task_queue: str = DEFAULT_TASK_QUEUE) -> str:
    """``capacity-<cluster>``: one arbiter per cluster and deployment (task queue)."""
    suffix = "" if task_queue == DEFAULT_TASK_QUEUE else f"-{task_queue}"
    return f"capacity-{cluster}{suffix}"


class AcquireRequest(BaseModel):
    """A campaign asks how many hosts it may hold out of service in a cluster."""

    cluster: str
    holder: str  # the campaign's owner name in the fleet (train-c00, ops-ticket-1)
    workflow_id: str  # its running workflow, watched so a dead holder can be cleaned up
    kind: str = "train"  # train | operation
    want: int = Field(ge=0)
    holding: int = Field(default=0, ge=0)  # hosts it holds right now
    limit: int = Field(ge=1)  # the cluster budget as this campaign reads it
    exclusive: bool = False  # serialise: others hand over before this one starts


class Grant(BaseModel):
    granted: int  # hosts the holder may hold at once from now on (it never has to drop any)
    waiting_for: list[str] = Field(default_factory=list)
    reason: str = ""


class ReleaseRequest(BaseModel):
    cluster: str
    holder: str
    reason: str = "finished"


class HolderEntry(BaseModel):
    holder: str
    workflow_id: str
    kind: str
    exclusive: bool
    want: int
    holding: int
    granted: int
    limit: int
    since: datetime


class ArbiterState(BaseModel):
    cluster: str
    holders: dict[str, HolderEntry] = Field(default_factory=dict)
    queue: list[str] = Field(default_factory=list)  # exclusive holders, first come first served
    log: list[str] = Field(default_factory=list)  # recent grants, handovers and releases


class ArbiterInput(BaseModel):
    cluster: str
    state: ArbiterState | None = None


class HoldersRequest(BaseModel):
    holders: list[str]
