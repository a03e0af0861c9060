"""Bounded histories of bulk operations: they continue as new mid-way and still finish right.

A low ``max_history_events`` makes both the ``BulkOperation`` and its ``ClusterOperation`` child
continue as new many times over one CUDA upgrade of ``small`` (fleet at 7,200x). The child
outlives the operation's runs, so the operation's later runs know it only by id: a pause
and a resume sent after the operation has continued as new must still reach it, and its outcome
must still arrive. On the dev server: the Java time-skipping server stops skipping time for good
once a child completes after the parent run that started it has closed (which is the point here).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from orchestrator.contracts.arbiter_types import ArbiterState, arbiter_workflow_id
from orchestrator.contracts.models import HostState
from orchestrator.contracts.ops_types import OpControl, OperationStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.ops import parse_spec_text
from orchestrator.ops.client import operation_status, start_operation, wait_for_operation
from tests.e2e import CUDA, NEW, audit_ok, op_spec, trainctl, upper, worker, write_spec
from tests.train_helpers import make_fleet
from workflows.bulk_operation import BulkOperation

#: History events per run: the child continues as new after every wave or two, the operation
#: after six or so (its children's progress signals are most of its history).
BOUND = 100
IN_REPAIR = "c00-z01-r007-h03"


async def runs(client: Client, workflow_id: str) -> list[tuple[WorkflowExecutionStatus, int]]:
    """(status, history length) of every run of ``workflow_id``, first to last."""
    desc = await client.get_workflow_handle(workflow_id).describe()
    run_id: str | None = desc.raw_description.workflow_execution_info.first_run_id
    out = []
    while run_id:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        status = (await handle.describe()).status
        assert status is not None
        history = await handle.fetch_history()
        out.append((status, len(history.events)))
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return out


def hosts(path: Path) -> dict[str, tuple[str, str, dict[str, str]]]:
    """name -> (state, reason, versions), straight from the fleet file."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, state, reason, versions FROM hosts").fetchall()
    finally:
        conn.close()
    return {n: (s, r, json.loads(v)) for n, s, r, v in rows}


async def test_bulk_operation_continues_as_new_and_finishes_right(dev_env, tmp_home, monkeypatch):
    """Over many runs of both workflows every host ends upgraded, quarantined or deferred."""
    client = dev_env.client
    monkeypatch.setenv("TEMPORAL_ADDRESS", client.service_client.config.target_host)
    path = make_fleet(tmp_home, 7200)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00") as sim:
        sim.inject_fault("cuda", CUDA["cuda"], 0.04, "test")  # a few hosts fail verification
        h = sim.hosts[IN_REPAIR]  # and one is out for repair beyond the operation's end
        if h.job_id is not None:
            sim.evict(h.job_id, "test")
        h.repair_until, h.owner = sim.now + 1e6, "repair"  # past the end at any speed
        sim._set_state(h, HostState.IN_REPAIR, "fleet", "faulty_gpu")
    fleet.close()
    raw = op_spec(budget={"max_unavailable": "10%"}, max_failures=12)
    spec = parse_spec_text(json.dumps(raw))
    op, queue = spec.operation_id, f"tq-{uuid.uuid4()}"
    handle = client.get_workflow_handle(op, result_type=OperationStatus)
    async with worker(dev_env, path, queue):
        started = await start_operation(
            client, spec, clusters=["c00"], task_queue=queue, max_history_events=BOUND
        )
        for _ in range(600):  # until the operation has continued as new at least once
            if len(await runs(client, op)) >= 2:
                break
            await asyncio.sleep(0.02)
        paused = await handle.execute_update(BulkOperation.pause, OpControl(reason="test"))
        assert paused.state == "paused"
        for _ in range(600):  # the child pauses once its wave in progress is done
            child = (await handle.query(BulkOperation.status)).clusters["c00"]
            if child.state in ("paused", "succeeded"):
                break
            await asyncio.sleep(0.05)
        assert child.state == "paused", "the rejoined child did not pause"
        assert child.waves_done < child.waves_total  # really mid-way
        ledger = await client.get_workflow_handle(arbiter_workflow_id("c00", queue)).query(
            "ledger", result_type=ArbiterState
        )
        assert op not in ledger.holders, "a paused operation keeps no budget"
        await handle.execute_update(BulkOperation.resume, OpControl(reason="test"))
        status = await asyncio.wait_for(wait_for_operation(client, op), 120)
        shown = await operation_status(client, op)
        # The CLI across runs: the same request again reports the ended operation.
        args = ("ops", "start", "--spec", str(write_spec(tmp_home / "op.json", raw)))
        code, again, err = await trainctl(*args, "--task-queue", queue, "--wait", "--json")
        _, cli_status, _ = await trainctl("ops", "status", "--id", op, "--json")
    op_runs, child_runs = await runs(client, op), await runs(client, f"{op}-c00")
    assert status.state == shown.state == cli_status["state"] == "succeeded", status.reason
    assert code == 0, err
    assert again["started"] is False and again["state"] == "succeeded"
    assert again["run_id"] == started.run_id  # the first run's, whichever run is current
    for chain in (op_runs, child_runs):
        assert len(chain) >= 3, chain
        assert all(s == WorkflowExecutionStatus.CONTINUED_AS_NEW for s, _ in chain[:-1]), chain
        assert chain[-1][0] == WorkflowExecutionStatus.COMPLETED
        assert max(n for _, n in chain) < 3 * BOUND, chain  # bounded: one wave past the bound
    c00 = status.clusters["c00"]
    assert c00.state == "succeeded" and c00.waves_done == c00.waves_total >= 10
    # Every host ends on the new pair, or quarantined or out for repair with a reason, the new
    # pair recorded as the cluster's target (a repaired host takes it before it returns).
    states: dict[str, list[str]] = {"in_service": [], "quarantined": [], "in_repair": []}
    for name, (state, reason, versions) in hosts(path).items():
        assert state in states, (name, state)
        states[state].append(name)
        if state == "in_service":
            assert upper(versions) == NEW, name
        else:
            assert reason, name
    fleet = SqliteFleet(path)
    targets = fleet.peek("c00").state.targets
    fleet.close()
    assert {k: targets[k] for k in CUDA} == CUDA
    assert IN_REPAIR in states["in_repair"] and len(states["in_service"]) >= 110, states
    # Counters carried over every run: every host is accounted for, once.
    assert c00.hosts_quarantined >= 1 and c00.hosts_deferred >= 1, c00
    assert c00.hosts_changed + c00.hosts_quarantined + c00.hosts_deferred == 128, c00
    audit_ok(path)
