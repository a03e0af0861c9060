"""An operation's plan holds when it runs: interruptions in the plan's range, the same waves.

One seeded CUDA upgrade of zone z00 of each of ``multi``'s four clusters, planned as ``ops plan``
plans it, then run on the time-skipping server with the fleet at speed 1 (its clock is the
workflows' clock, so new jobs arrive and old ones end while the waves run). The twenty-operation
measurement is ``benchmarks/bench_ops_plan_holds.py``.
"""

from __future__ import annotations

import contextlib
import json
import uuid

from temporalio.service import RPCError

from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.ops_types import OperationInput
from orchestrator.execution.ops_take import plan_scope
from orchestrator.fleet import SqliteFleet
from orchestrator.ops import parse_spec_text
from tests.e2e import CUDA, audit_ok, outcome
from tests.train_helpers import make_fleet
from workflows.bulk_operation import BulkOperation

SPEC = {
    "kind": "cuda-upgrade",
    "scope": {"cluster": "c0*", "zones": ["z00"]},
    "targets": CUDA,
    "budget": {"max_unavailable": "25%"},
    "drain": {"max_wait": "2h"},
    "max_failures": 64,
}


async def test_each_cluster_interrupts_within_its_plan_range_in_the_planned_waves(
    temporal_env, tmp_home, task_queue
):
    """Every cluster's interrupted jobs lie in its planned range; its waves are the plan's."""
    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now, seed=1, preset="multi")
    spec = parse_spec_text(json.dumps({**SPEC, "request_id": f"holds-{uuid.uuid4().hex[:8]}"}))
    fleet = SqliteFleet(path)
    try:
        plan = plan_scope(fleet, spec, now).plan
    finally:
        fleet.close()
    for c in plan.clusters:
        low, high = c.jobs_interrupted_range
        assert high <= 2 * low + 2, c
    async with build_worker(temporal_env.client, path, task_queue):
        handle = await temporal_env.client.start_workflow(
            BulkOperation.run,
            OperationInput(spec=spec),
            id=spec.operation_id,
            task_queue=task_queue,
        )
        try:
            status = await outcome(handle)
        finally:  # while the worker still runs, so nothing is left pending on its queue
            for c in plan.clusters:
                with contextlib.suppress(RPCError):
                    await temporal_env.client.get_workflow_handle(
                        arbiter_workflow_id(c.cluster, task_queue)
                    ).terminate("test cleanup")
    assert status.state == "succeeded", status.reason
    for c in plan.clusters:
        ran = status.clusters[c.cluster]
        low, high = c.jobs_interrupted_range
        assert low <= ran.jobs_interrupted <= high, (c.cluster, ran.jobs_interrupted, low, high)
        assert (ran.waves_done, ran.replans) == (c.waves, []), c.cluster
    audit_ok(path)
