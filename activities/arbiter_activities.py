"""Activities that talk to Temporal itself: ask the arbiter for capacity, check holders.

Workflows cannot send updates to other workflows, so a campaign asks the arbiter through these
activities, which use the worker's client (update-with-start: the arbiter of a cluster starts on
first use and its id comes from the cluster).
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.contracts.arbiter_types import (
    AcquireRequest,
    ArbiterInput,
    ArbiterState,
    Grant,
    HoldersRequest,
    ReleaseRequest,
    arbiter_workflow_id,
)


async def acquire_grant(client: Client, task_queue: str, req: AcquireRequest) -> Grant:
    """Ask ``req.cluster``'s arbiter (started on first use) how many hosts ``req`` may hold."""
    op: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        "CapacityArbiter",
        ArbiterInput(cluster=req.cluster),
        id=arbiter_workflow_id(req.cluster, task_queue),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"Capacity budget of {req.cluster}: who may hold hosts out",
    )
    return await client.execute_update_with_start_workflow(
        "acquire", req, start_workflow_operation=op, result_type=Grant
    )


class ArbiterActivities:
    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    @activity.defn(name="arbiter_acquire")
    async def acquire(self, req: AcquireRequest) -> Grant:
        return await acquire_grant(self.client, self.task_queue, req)

    @activity.defn(name="arbiter_release")
    async def release(self, req: ReleaseRequest) -> None:
        handle = self.client.get_workflow_handle(arbiter_workflow_id(req.cluster, self.task_queue))
        try:
            await handle.execute_update("release", req, result_type=ArbiterState)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise  # an arbiter that no longer runs holds nothing: done

    @activity.defn(name="closed_workflows")
    async def closed_workflows(self, req: HoldersRequest) -> list[str]:
        """Which of these holder workflows are no longer running."""
        closed = []
        for wid in req.holders:
            try:
                desc = await self.client.get_workflow_handle(wid).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    closed.append(wid)
                    continue
                raise
            if desc.status != WorkflowExecutionStatus.RUNNING:
                closed.append(wid)
        return closed

    def all(self) -> list[object]:
        return [self.acquire, self.release, self.closed_workflows]
