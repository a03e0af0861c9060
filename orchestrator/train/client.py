"""A cluster's maintenance train as seen from outside the workers: start it, ask it, steer it.

Why this module exists: how a train meets Temporal (one workflow per cluster, ``train-<cluster>``,
its search attributes, its ``status`` query and its pause/resume/stop/reconfigure updates) is
part of the train's contract, like its spec and its messages, so it lives in this package rather
than in the command line. The CLI parses options, calls these functions and prints what they
return; the demo calls the same ones.

Every function takes a connected :class:`temporalio.client.Client` (made by
:func:`orchestrator.client.connect`, which sets the pydantic data converter) and returns models of
:mod:`orchestrator.train.types`. The workflow is addressed by its registered name rather than by
importing ``workflows``, which import this package's messages: no import runs up a layer.
A change the train refuses raises :class:`TrainRefused` (a ``ValueError``: the caller's input);
a train that is not there raises :class:`TrainNotFound`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.service import RPCError

from orchestrator.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
from orchestrator.train.spec import TrainSpec, train_workflow_id
from orchestrator.train.types import ControlRequest, TrainChange, TrainInput, TrainStatus

#: The name ``workflows.cluster_train.ClusterTrain`` is registered under.
WORKFLOW_NAME = "ClusterTrain"

TrainHandle = WorkflowHandle[Any, TrainStatus]
TrainAction = Literal["pause", "resume", "stop"]


class TrainNotFound(LookupError):
    """No (running) train for that cluster; the message says which."""


class TrainRefused(ValueError):
    """The train refused a control or a change (its validator said why)."""


def train_handle(client: Client, cluster: str) -> TrainHandle:
    """The cluster's train, whichever run of it is the current one."""
    return client.get_workflow_handle(train_workflow_id(cluster), result_type=TrainStatus)


async def start_train(
    client: Client, spec: TrainSpec, *, task_queue: str, replace: bool = False
) -> TrainHandle:
    """Start the cluster's train (one per cluster; its id comes from the cluster).

    A train already running fails the start (``WorkflowAlreadyStartedError``), unless
    ``replace`` terminates it first.
    """
    return await client.start_workflow(
        WORKFLOW_NAME,
        TrainInput(spec=spec),
        id=spec.workflow_id,
        task_queue=task_queue,
        result_type=TrainStatus,
        id_conflict_policy=(
            WorkflowIDConflictPolicy.TERMINATE_EXISTING
            if replace
            else WorkflowIDConflictPolicy.FAIL
        ),
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(TRAIN_CLUSTER, spec.cluster),
                SearchAttributePair(TRAIN_CAMPAIGN, spec.campaign or spec.workflow_id),
                SearchAttributePair(TRAIN_PHASE, "running"),
            ]
        ),
        static_summary=f"Maintenance train of {spec.cluster}: {spec.targets}",
    )


async def train_status(client: Client, cluster: str) -> TrainStatus:
    """Where the cluster's train stands (its ``status`` query)."""
    handle = train_handle(client, cluster)
    try:
        return await handle.query("status", result_type=TrainStatus)
    except RPCError as err:
        raise TrainNotFound(f"no train {handle.id}: {err.message}") from None


async def first_status(
    client: Client, cluster: str, *, tries: int = 50, pause: float = 0.2
) -> TrainStatus:
    """The status of a train just started: its first query may come before its first task."""
    for _ in range(tries):
        try:
            return await train_status(client, cluster)
        except TrainNotFound:
            await asyncio.sleep(pause)
    return await train_status(client, cluster)


async def _update(client: Client, cluster: str, name: str, arg: BaseModel) -> TrainStatus:
    handle = train_handle(client, cluster)
    try:
        return await handle.execute_update(name, arg, result_type=TrainStatus)
    except WorkflowUpdateFailedError as err:
        raise TrainRefused(f"{name}: {err.cause}") from None
    except RPCError as err:
        raise TrainNotFound(f"no running train {handle.id}: {err.message}") from None


async def control_train(
    client: Client, cluster: str, action: TrainAction, reason: str = ""
) -> TrainStatus:
    """Pause, resume or stop the cluster's train; its status once the update is accepted."""
    return await _update(client, cluster, action, ControlRequest(reason=reason))


async def reconfigure_train(client: Client, cluster: str, change: TrainChange) -> TrainStatus:
    """Change domain size, budget or targets of a running train; the next visits use them."""
    return await _update(client, cluster, "reconfigure", change)


async def train_result(client: Client, cluster: str) -> TrainStatus:
    """Wait for the cluster's train to end (across continue-as-new); its last status."""
    return await train_handle(client, cluster).result()
