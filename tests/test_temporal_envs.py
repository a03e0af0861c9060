"""The two Temporal test environments work: real servers, pydantic payloads, sandboxed workflows."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from uuid import uuid4

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from orchestrator.contracts.search_attributes import TRAIN_CLUSTER
    from orchestrator.infra.logging import add_temporal_context


class NapInput(BaseModel):
    nap: timedelta


class NapResult(BaseModel):
    started: datetime
    finished: datetime
    logged_workflow_id: str


@activity.defn(name="test-envs.log-context")
async def log_context() -> str:
    """Return the workflow id that the logging processor sees from inside an activity."""
    return str(add_temporal_context(None, "info", {}).get("workflow_id", ""))


@workflow.defn(name="test-envs.nap")
class NapWorkflow:
    @workflow.run
    async def run(self, params: NapInput) -> NapResult:
        started = workflow.now()
        await asyncio.sleep(params.nap.total_seconds())
        logged = await workflow.execute_activity(
            log_context, start_to_close_timeout=timedelta(seconds=30)
        )
        return NapResult(started=started, finished=workflow.now(), logged_workflow_id=logged)


async def test_time_skipping_env_crosses_days_in_seconds(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A workflow sleeping three days finishes in seconds, with workflow time three days later."""
    client = temporal_env.client
    wf_id = f"nap-{uuid4()}"
    async with Worker(
        client, task_queue=task_queue, workflows=[NapWorkflow], activities=[log_context]
    ):
        result = await asyncio.wait_for(
            client.execute_workflow(
                NapWorkflow.run, NapInput(nap=timedelta(days=3)), id=wf_id, task_queue=task_queue
            ),
            timeout=30,
        )
    assert result.finished - result.started >= timedelta(days=3)
    assert result.logged_workflow_id == wf_id


async def test_dev_env_finds_workflows_by_train_cluster(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A workflow started with TrainCluster="c00" is found by a visibility query on it."""
    client = dev_env.client
    wf_id = f"nap-{uuid4()}"
    async with Worker(
        client, task_queue=task_queue, workflows=[NapWorkflow], activities=[log_context]
    ):
        handle = await client.start_workflow(
            NapWorkflow.run,
            NapInput(nap=timedelta(seconds=0)),
            id=wf_id,
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(TRAIN_CLUSTER, "c00")]),
        )
        result = await handle.result()
    assert result.logged_workflow_id == wf_id

    query = f'TrainCluster="c00" AND WorkflowId="{wf_id}"'
    found: list[str] = []
    for _ in range(50):  # visibility is eventually consistent
        found = [wf.id async for wf in client.list_workflows(query)]
        if found:
            break
        await asyncio.sleep(0.2)
    assert found == [wf_id]
