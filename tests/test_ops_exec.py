"""Bulk-operation execution on real Temporal servers and a real SQLite fleet.

Most tests run on the time-skipping server with the fleet at speed 1 (its clock is the
workflows' clock, so skipped hours are hours for jobs and repairs too); the CLI tests run on the
dev server with a fast fleet, through the real ``trainctl`` in a subprocess. Each test has its
own task queue, hence its own capacity arbiter, ended while its worker still runs: the Java
time-skipping server stops skipping time for good once a workflow with a task nobody will ever
pick up is terminated.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from orchestrator.contracts.arbiter_types import ArbiterState, arbiter_workflow_id
from orchestrator.contracts.ops_types import OpControl as OpControlReq
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import parse_spec_text
from orchestrator.ops.ui import operation_details
from tests.e2e import (
    CUDA,
    NEW,
    OLD,
    audit_ok,
    op_spec,
    outcome,
    run_cli,
    start_op,
    terminate,
    trainctl,
    upper,
    worker,
    write_spec,
)
from tests.train_helpers import host_states, make_fleet
from workflows.bulk_operation import BulkOperation


# ------------------------------------------------------------------ time-skipping
async def test_failed_wave_is_rolled_back_whole(temporal_env, tmp_home, task_queue):
    """A bad CUDA build fails verification: its whole wave goes back to the old versions."""
    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00", now) as sim:
        sim.inject_fault("cuda", "12.6", 1.0, "test")
    fleet.close()
    async with worker(temporal_env, path, task_queue):
        handle = await start_op(temporal_env, task_queue, op_spec(max_failures=0))
        status = await outcome(handle)
    assert status.state == "failed"
    assert "rolled back" in status.reason and "above max_failures 0" in status.reason
    c00 = status.clusters["c00"]
    assert c00.waves_done == 0 and c00.hosts_changed == 0
    assert c00.hosts_rolled_back + c00.hosts_quarantined >= 20
    # its page's cost to jobs, read from the record at its wave: the wave held hosts
    assert c00.cost is not None and c00.cost.total_gpu_hours >= 0
    assert "Cost to jobs" in operation_details(status)
    states = host_states(path)
    assert all(upper(v) == OLD for _, _, v in states.values()), "a host kept the bad build"
    fleet = SqliteFleet(path)
    changed = {
        ev.host
        for _, ev, _ in fleet.events()
        if ev.kind == "updated" and ev.detail["after"].get("cuda") == "12.6"
    }
    back = {
        ev.host
        for _, ev, _ in fleet.events()
        if ev.kind == "updated" and ev.detail["after"].get("cuda") == OLD[1]
    }
    targets = fleet.peek("c00").state.targets
    fleet.close()
    assert changed and changed <= back
    assert "cuda" not in targets  # the stopped operation no longer pushes its build
    audit_ok(path)


def cordon_checks(path: Path) -> tuple[int, list[str]]:
    """Replay the event log: at every budgeted cordon, hosts out of service must fit its limit."""
    fleet = SqliteFleet(path)
    down: set[str] = set()
    checked, broken = 0, []
    try:
        for seq, ev, _ in fleet.events():
            if ev.kind != "host_state" or ev.host is None:
                continue
            (down.discard if ev.detail["after"] == "in_service" else down.add)(ev.host)
            if ev.detail.get("limit") is not None:
                checked += 1
                if len(down) > ev.detail["limit"]:
                    broken.append(
                        f"#{seq} {ev.detail.get('owner')}: {len(down)} > {ev.detail['limit']}"
                    )
    finally:
        fleet.close()
    return checked, broken


async def test_cluster_consistency_needs_a_window_then_goes_as_one_wave(
    temporal_env, tmp_home, task_queue
):
    """`consistency: cluster` is refused without a window; with 100% all hosts change at once."""
    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now)
    refused = run_cli(
        "ops",
        "start",
        "--spec",
        str(write_spec(tmp_home / "s.json", op_spec(consistency="cluster"))),
        "--json",
    )
    assert refused.exit_code == 2, refused.output
    assert json.loads(refused.stdout)["started"] is False
    assert "consistency: cluster needs a window budget of 100%" in refused.output
    spec = op_spec(
        consistency="cluster", window={"max_unavailable": "100%", "duration": "24h"}, max_failures=6
    )
    async with worker(temporal_env, path, task_queue):
        denied = await outcome(  # started through the API, the workflow refuses it too
            await start_op(temporal_env, task_queue, op_spec(consistency="cluster"))
        )
        handle = await start_op(temporal_env, task_queue, spec)
        status = await handle.result()
    assert denied.state == "failed" and denied.reason.startswith("refused: c00: consistency")
    assert status.state == "succeeded", status.reason
    c00 = status.clusters["c00"]
    assert c00.hosts_changed >= 120, c00
    assert c00.hosts_requeued == 0, c00  # a refusing job is waited for, never a second wave
    fleet = SqliteFleet(path)
    op = parse_spec_text(json.dumps(spec)).operation_id
    cordons = {
        (ev.t, ev.host)
        for _, ev, _ in fleet.events()
        if ev.kind == "host_state" and ev.detail.get("owner") == op
    }
    updates = {
        (ev.t, ev.host)
        for _, ev, _ in fleet.events()
        if ev.kind == "updated" and ev.detail["after"].get("cuda")
    }
    fleet.close()
    # One cut-over for the whole cluster: every host in service at the start was out before
    # any changed, and all changed at one instant. A host that broke meanwhile went to repair
    # and, back, gets its own later wave (the operation covers its scope): one wave per instant.
    first = min(t for t, _ in updates)
    at_first = {h for t, h in updates if t == first}
    assert len(at_first) >= 120, len(at_first)
    assert {h for t, h in cordons if t <= first} >= at_first
    later = {h for t, h in updates if t > first}
    assert not later & at_first, later
    assert c00.waves_done == len({t for t, _ in updates}), (c00, sorted(updates)[-3:])
    for name, (state, _, versions) in host_states(path).items():
        if state == "in_service":
            assert upper(versions) == NEW, name
    audit_ok(path)


@pytest.mark.parametrize("speed", [1.0, MAX_SPEED], ids=["speed-1", "speed-max"])
async def test_operation_and_train_share_the_budget_with_a_visible_handover(
    temporal_env, tmp_home, task_queue, speed
):
    """A train and an operation on one cluster never exceed its budget; the train hands over."""
    from orchestrator.contracts.train_types import ControlRequest, TrainInput, TrainStatus
    from tests.train_helpers import spec as train_spec
    from workflows.cluster_train import ClusterTrain

    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, speed, now)
    async with worker(temporal_env, path, task_queue):
        train = await temporal_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec(budget={"max_unavailable": "25%"})),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        try:
            handle = await start_op(temporal_env, task_queue, op_spec())
            status = await handle.result()
            history = await temporal_env.client.get_workflow_handle(
                f"{handle.id}-c00"
            ).fetch_history()
            await train.execute_update(
                "stop", ControlRequest(reason="test"), result_type=TrainStatus
            )
            train_status = await train.result()
        finally:
            await terminate(temporal_env, train.id)
    assert status.state == "succeeded", status.reason
    assert train_status.state == "stopped"
    upserts = [
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in history.events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
    ]
    phases = [fields["TrainPhase"].data for fields in upserts if "TrainPhase" in fields]
    assert b'"waiting"' in phases, "the handover wait was not visible as TrainPhase=waiting"
    checked, broken = cordon_checks(path)
    assert checked > 100 and not broken, broken[:3]
    # Replay who holds what: when the operation cordons, the train holds nothing, and the
    # train takes nothing until the operation has let go of its last host.
    fleet = SqliteFleet(path)
    holder: dict[str, str] = {}
    op_active = False
    for _, ev, _ in fleet.events():
        if ev.kind == "owner_closed" and ev.detail["owner"] == handle.id:
            op_active = False
        if ev.kind != "host_state" or ev.host is None:
            continue
        owner = ev.detail.get("owner")
        if owner == handle.id and not op_active:
            assert not any(o.startswith("train-") for o in holder.values()), "no handover"
            op_active = True
        if owner and owner.startswith("train-"):
            assert not op_active, f"the train took {ev.host} while the operation ran"
        if owner:
            holder[ev.host] = owner
        elif ev.detail["after"] in ("in_service", "quarantined", "in_repair"):
            holder.pop(ev.host, None)
    fleet.close()
    audit_ok(path)


async def test_abort_midway_leaves_every_host_old_or_new(temporal_env, tmp_home, task_queue):
    """Aborting after a wave leaves every host on the old or the new pair, in service or out."""
    from datetime import timedelta

    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now)
    async with worker(temporal_env, path, task_queue):
        handle = await start_op(
            temporal_env, task_queue, op_spec(budget={"max_unavailable": "10%"})
        )
        for _ in range(200):
            await temporal_env.sleep(timedelta(minutes=20))
            if (await handle.query(BulkOperation.status)).waves_done >= 1:
                break
        await handle.execute_update(BulkOperation.abort, OpControlReq(reason="test abort"))
        status = await outcome(handle)
    assert status.state == "aborted" and status.reason == "test abort"
    assert 1 <= status.waves_done < status.waves_total
    pairs = Counter()
    for name, (state, owner, versions) in host_states(path).items():
        pair = upper(versions)
        assert pair in (OLD, NEW), name
        assert owner != handle.id, f"{name} still held by the operation"
        assert state in ("in_service", "quarantined", "in_repair") or owner.startswith("repair"), (
            name
        )
        pairs[pair] += 1
    assert pairs[OLD] and pairs[NEW]  # really mid-way
    audit_ok(path)  # includes: no job ever started on mixed versions


# ------------------------------------------------------------------ dev server
async def test_repeated_request_id_is_one_operation(dev_env, tmp_home, monkeypatch):
    """`ops start` twice with one request_id reports the running operation instead of a second;
    the same request_id with a different spec exits 2 naming ``request_id``."""
    make_fleet(tmp_home, 36000.0)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    spec_file = write_spec(tmp_home / "s.json", op_spec(request_id="ticket-4711"))
    args = ("ops", "start", "--spec", str(spec_file), "--task-queue", "no-worker", "--json")
    code1, one, _ = await trainctl(*args)
    code2, two, err = await trainctl(*args)
    try:
        assert code1 == 0 and code2 == 0, err
        assert one["operation_id"] == two["operation_id"] == "ops-ticket-4711"
        assert one["started"] is True and one["already_running"] is False
        assert two["started"] is False and two["already_running"] is True
        assert one["run_id"] == two["run_id"]
        # The first reply and a repeat carry the same fields: the operation's status.
        assert set(one) == set(two) and {"kind", "targets", "waves_total"} <= set(one), one
        assert one["waves_total"] >= 1 and one["kind"] == two["kind"]
        desc = await dev_env.client.get_workflow_handle("ops-ticket-4711").describe()
        assert desc.run_id == one["run_id"]  # still the first and only run
        # With no worker on its queue, status and control say so instead of hanging.
        for cmd in (("status",), ("pause", "--reason", "test")):
            code4, four, _ = await trainctl("ops", *cmd, "--id", "ops-ticket-4711", "--json")
            assert code4 == 1 and "trainctl worker" in four["error"], (cmd, four)
        # The same request_id with another spec is refused, naming request_id, while the
        # operation runs and after it has ended; nothing new is started.
        other = op_spec(request_id="ticket-4711", targets={"gpu_driver": "570.1.2", "cuda": "12.8"})
        other_args = ("ops", "start", "--spec", str(write_spec(tmp_home / "o.json", other)))
        for _ in ("running", "ended"):
            code3, three, _ = await trainctl(*other_args, "--task-queue", "no-worker", "--json")
            assert code3 == 2 and three["field"] == "request_id", three
            assert three["exit_code"] == 2 and "targets" in three["error"], three
            await terminate(dev_env, "ops-ticket-4711")
        desc = await dev_env.client.get_workflow_handle("ops-ticket-4711").describe()
        assert desc.run_id == one["run_id"]
    finally:
        await terminate(dev_env, "ops-ticket-4711")


async def test_ops_start_wait_with_a_train_running_throughout(dev_env, tmp_home, monkeypatch):
    """`ops start --wait` on `small` beside a running train succeeds: new cuda, audit clean."""
    from temporalio.client import WorkflowExecutionStatus

    from orchestrator.contracts.train_types import ControlRequest, TrainInput, TrainStatus
    from tests.train_helpers import spec as train_spec
    from workflows.cluster_train import ClusterTrain

    path = make_fleet(tmp_home, 36000.0)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    queue = f"tq-{uuid.uuid4()}"
    spec_file = write_spec(tmp_home / "op.json", op_spec())
    async with worker(dev_env, path, queue):
        train = await dev_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec(budget={"max_unavailable": "25%"})),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=queue,
        )
        try:
            start = ("ops", "start", "--spec", str(spec_file), "--task-queue", queue, "--json")
            code, out, err = await asyncio.wait_for(trainctl(*start, "--wait"), 50)
            assert code == 0, err
            assert (await train.describe()).status == WorkflowExecutionStatus.RUNNING
            _, status, _ = await trainctl("ops", "status", "--id", out["operation_id"], "--json")
            again_code, again, again_err = await trainctl(*start)
            await train.execute_update(
                "stop", ControlRequest(reason="test"), result_type=TrainStatus
            )
            await asyncio.wait_for(train.result(), 20)
        finally:
            await terminate(dev_env, train.id)
    assert out["state"] == status["state"] == "succeeded" and out["hosts_changed"] > 100
    assert again_code == 0, again_err
    assert again["started"] is False and again["already_running"] is False
    assert again["run_id"] == out["run_id"] and again["state"] == "succeeded"
    fleet = SqliteFleet(path)
    closed = max(
        s
        for s, ev, _ in fleet.events()
        if ev.kind == "owner_closed" and ev.detail["owner"] == out["operation_id"]
    )
    assert closed > 0
    targets = fleet.peek("c00").state.targets
    fleet.close()
    assert {k: targets[k] for k in CUDA} == CUDA  # hosts out for repair take it first
    # Every host serving is on the new stack, hosts back from repair included (repair reimages).
    for name, (state, _, versions) in host_states(path).items():
        if state == "in_service":
            assert upper(versions) == NEW, name
    checked, broken = cordon_checks(path)
    assert checked > 50 and not broken, broken[:3]
    audit_ok(path)


async def test_pause_resume_abort_through_the_cli(dev_env, tmp_home, monkeypatch):
    """`ops pause` hands the budget back, `resume` carries on, `abort` ends with no host mixed."""
    path = make_fleet(tmp_home, 36000.0)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    queue = f"tq-{uuid.uuid4()}"
    spec = op_spec(budget={"max_unavailable": "5%"}, drain={"max_wait": "8h"})
    spec_file = write_spec(tmp_home / "op.json", spec)
    async with worker(dev_env, path, queue):
        code, out, err = await trainctl(
            "ops", "start", "--spec", str(spec_file), "--task-queue", queue, "--json"
        )
        assert code == 0 and out["started"], err
        op = out["operation_id"]
        code, again, _ = await trainctl("ops", "resume", "--id", op, "--json")
        assert code == 0 and again["state"] == "running"  # a resume of what runs: success
        handle = dev_env.client.get_workflow_handle(op, result_type=OperationStatus)
        for _ in range(200):  # let it hold the budget and change a wave first
            if (await handle.query(BulkOperation.status)).waves_done:
                break
            await asyncio.sleep(0.05)
        _, paused, _ = await trainctl("ops", "pause", "--id", op, "--json")
        assert paused["state"] == "paused"
        code, twice, _ = await trainctl("ops", "pause", "--id", op, "--json")
        assert code == 0 and twice["state"] == "paused"  # a pause of what is paused: success
        code, joined, _ = await trainctl(
            "ops", "start", "--spec", str(spec_file), "--task-queue", queue, "--json"
        )  # the same request while paused: its true status, never a stale "running"
        assert code == 0 and joined["already_running"] and joined["state"] == "paused", joined
        for _ in range(100):  # the cluster pauses once its wave in progress is done
            if (await handle.query(BulkOperation.status)).clusters["c00"].state == "paused":
                break
            await asyncio.sleep(0.1)
        ledger = await dev_env.client.get_workflow_handle(arbiter_workflow_id("c00", queue)).query(
            "ledger", result_type=ArbiterState
        )
        assert op not in ledger.holders and f"{op} released (paused)" in "\n".join(ledger.log)
        _, resumed, _ = await trainctl("ops", "resume", "--id", op, "--json")
        assert resumed["state"] == "running"
        _, aborting, _ = await trainctl("ops", "abort", "--id", op, "--reason", "test", "--json")
        assert aborting["state"] == "aborting"
        final = await asyncio.wait_for(outcome(handle), 30)
        _, shown, _ = await trainctl("ops", "status", "--id", op.removeprefix("ops-"), "--json")
        desc = await handle.describe()
    assert final.state == shown["state"] == "aborted"
    # Aborted is not completed: the workflow list shows it Failed (issue 25).
    assert desc.status == WorkflowExecutionStatus.FAILED
    for name, (_, owner, versions) in host_states(path).items():
        assert upper(versions) in (OLD, NEW), name
        assert owner != op, f"{name} still held by the operation"
    audit_ok(path)
