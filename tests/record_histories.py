"""Record the workflow histories that ``tests/test_replay.py`` replays against the current code.

Usage: ``python tests/record_histories.py`` (about 40 s). On a private dev server it runs one
real cycle of a train over the ``small`` fleet at 10 fleet hours per wall second, with a
``nic_firmware`` build that is bad on some hosts (quarantines), one pause and resume, and one live
target change. The train continues as new every 600 events. It writes to ``tests/histories/``
every run of the ClusterTrain (``cluster_train_run1.json``...), two DomainMaintenance
children (one that quarantined a host, one that evicted a job), the CapacityArbiter history when
there is an arbiter, and ``commands.json``: each history's workflow id, type and command
sequence, pinned so that a new recording that changes the sequence shows in review.

Re-record when a workflow change is meant to alter its commands and old runs are gone or guarded
by ``workflow.patched``. To keep replaying an old history next to a new one, rename its file
first (``cluster_train_run1.json`` to ``cluster_train_v1_run1.json``) and its ``commands.json``
entry; the script keeps entries for files it does not write.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = ROOT / "tests" / "histories"
MANIFEST = HISTORIES / "commands.json"
TRAIN_ID = "train-c00"  # the production id: this server is private
SPEED = 36000.0
BAD_NIC = 0.12  # share of hosts the bad nic_firmware build breaks
CONTINUE_AFTER_EVENTS = 600  # a first run that continues as new, then the run that finishes

E = EventType


def _command(ev: HistoryEvent) -> str | None:
    """The command a workflow issued that produced ``ev``, or None for other events."""
    t = ev.event_type
    if t == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return f"activity {ev.activity_task_scheduled_event_attributes.activity_type.name}"
    if t == E.EVENT_TYPE_TIMER_STARTED:
        return "timer"
    if t == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        attrs = ev.start_child_workflow_execution_initiated_event_attributes
        return f"child {attrs.workflow_type.name}"
    if t == E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
        return (
            f"signal {ev.signal_external_workflow_execution_initiated_event_attributes.signal_name}"
        )
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        accepted = ev.workflow_execution_update_accepted_event_attributes
        return f"accept update {accepted.accepted_request.input.name}"
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
        return "complete update"
    if t == E.EVENT_TYPE_MARKER_RECORDED:
        return f"marker {ev.marker_recorded_event_attributes.marker_name}"
    simple = {
        E.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED: "cancel activity",
        E.EVENT_TYPE_TIMER_CANCELED: "cancel timer",
        E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "cancel external",
        E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upsert search attributes",
        E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: "modify properties",
        E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continue as new",
        E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "complete",
        E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "fail",
        E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "cancelled",
    }
    return simple.get(t)


def command_sequence(history: WorkflowHistory) -> list[str]:
    """The ordered commands of a history, repeats folded as ``"activity plan_domain x3"``."""
    folded: list[tuple[str, int]] = []
    for ev in history.events:
        cmd = _command(ev)
        if cmd is None:
            continue
        if folded and folded[-1][0] == cmd:
            folded[-1] = (cmd, folded[-1][1] + 1)
        else:
            folded.append((cmd, 1))
    return [cmd if n == 1 else f"{cmd} x{n}" for cmd, n in folded]


def workflow_type(history: WorkflowHistory) -> str:
    return history.events[0].workflow_execution_started_event_attributes.workflow_type.name


def _result(history: WorkflowHistory) -> dict[str, Any]:
    last = history.events[-1]
    if last.event_type != E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return {}
    payloads = last.workflow_execution_completed_event_attributes.result.payloads
    return json.loads(payloads[0].data) if payloads else {}


# --------------------------------------------------------------------------- the run
def _fleet_returns(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        (n,) = conn.execute(
            "SELECT count(*) FROM events WHERE actor=? AND kind='host_state' "
            'AND detail LIKE \'%"before": "verifying", "after": "in_service"%\'',
            (TRAIN_ID,),
        ).fetchone()
        return int(n)
    finally:
        conn.close()


async def _until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def run_train(client: Client, home: Path) -> list[WorkflowHistory]:
    """One cycle of a train with a bad build, a pause/resume, a target change and a
    continue-as-new; returns the histories worth keeping."""
    from orchestrator.app.worker import build_worker
    from orchestrator.contracts.train_types import ControlRequest, TrainChange, TrainInput
    from orchestrator.fleet import SqliteFleet
    from tests.train_helpers import TARGETS, make_fleet, spec
    from workflows.cluster_train import ClusterTrain

    path = make_fleet(home, SPEED)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00") as sim:
        sim.inject_fault("nic_firmware", TARGETS["nic_firmware"], BAD_NIC, "recorder")
    fleet.close()
    inp = TrainInput(spec=spec(stop_after_cycles=1, halt_after_failures=100, halt_failure_rate=1.0))
    if "max_history_events" in TrainInput.model_fields:
        inp.max_history_events = CONTINUE_AFTER_EVENTS
    async with build_worker(client, path, "record-histories"):
        handle = await client.start_workflow(
            ClusterTrain.run, inp, id=TRAIN_ID, task_queue="record-histories"
        )
        await _until(lambda: _fleet_returns(path) >= 8, "the first visits")
        await handle.execute_update(ClusterTrain.pause, ControlRequest(reason="recording"))
        await asyncio.sleep(1.0)
        await handle.execute_update(ClusterTrain.resume, ControlRequest(reason="recording"))
        await _until(lambda: _fleet_returns(path) >= 32, "visits after resume")
        await handle.execute_update(
            ClusterTrain.reconfigure, TrainChange(targets={"os": "6.8.0-50"})
        )
        status = await asyncio.wait_for(handle.result(), 180)
        print(
            f"train: {status.state}, {status.hosts_visited_this_cycle} visited, "
            f"{status.quarantined + status.in_repair} quarantined or in repair, "
            f"{status.jobs_interrupted} jobs interrupted",
            file=sys.stderr,
        )
        trains = await _runs(client, TRAIN_ID, handle.first_execution_run_id)
        extra = []
        from orchestrator.contracts.arbiter_types import arbiter_workflow_id

        # The arbiter ends by itself once the train has released its capacity.
        arbiter = client.get_workflow_handle(arbiter_workflow_id("c00", "record-histories"))
        try:
            for _ in range(200):
                if await _closed(arbiter):
                    break
                await asyncio.sleep(0.1)
            extra.append(await arbiter.fetch_history())
        except RPCError:
            pass  # no arbiter in this version of the code
        extra += await _record_operation(client)
    children = []
    for ev in (ev for h in trains for ev in h.events):
        if ev.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            child_id = ev.start_child_workflow_execution_initiated_event_attributes.workflow_id
            children.append(await client.get_workflow_handle(child_id).fetch_history())
    return [*trains, *_pick_children(children), *extra]


async def _record_operation(client: Client) -> list[WorkflowHistory]:
    """A CUDA upgrade over the same fleet after the train: BulkOperation and ClusterOperation."""
    from orchestrator.contracts.ops_types import OperationInput
    from orchestrator.ops import OperationSpec, operation_id
    from workflows.bulk_operation import BulkOperation

    op = OperationSpec.model_validate(
        {
            "kind": "cuda-upgrade",
            "scope": {"cluster": "c00"},
            "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
            "budget": {"max_unavailable": "10%"},
            "request_id": "record-histories",
            "max_failures": 3,
        }
    )
    op_id = operation_id(op)
    from temporalio.client import WorkflowFailureError

    try:
        await asyncio.wait_for(
            client.execute_workflow(
                BulkOperation.run, OperationInput(spec=op), id=op_id, task_queue="record-histories"
            ),
            240,
        )
    except WorkflowFailureError as err:  # a rolled-back wave is a history worth keeping too
        print(f"operation: {err.cause}", file=sys.stderr)
    parent = await client.get_workflow_handle(op_id).fetch_history()
    out = [parent]
    for ev in parent.events:
        if ev.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            child_id = ev.start_child_workflow_execution_initiated_event_attributes.workflow_id
            out.append(await client.get_workflow_handle(child_id).fetch_history())
    return out


async def _closed(handle: Any) -> bool:
    from temporalio.client import WorkflowExecutionStatus

    return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING


async def _runs(client: Client, workflow_id: str, run_id: str | None) -> list[WorkflowHistory]:
    """Every run of a workflow that continued as new, first to last."""
    runs = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        runs.append(history)
        last = history.events[-1]
        run_id = None
        if last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return runs


def _pick_children(children: list[WorkflowHistory]) -> list[WorkflowHistory]:
    """A domain that quarantined a host, and one with other commands (an eviction if any)."""
    quarantined = [h for h in children if _result(h).get("quarantined")]
    if not quarantined:
        raise RuntimeError("no domain quarantined a host: raise BAD_NIC")
    first = max(quarantined, key=lambda h: len(command_sequence(h)))
    others = [h for h in children if command_sequence(h) != command_sequence(first)] or [
        h for h in children if h is not first
    ]

    def score(h: WorkflowHistory) -> tuple[bool, int]:
        commands = command_sequence(h)
        return any("evict_jobs" in c for c in commands), len(commands)

    return [first, max(others, key=score)]


def _name(history: WorkflowHistory, taken: set[str]) -> str:
    kind = {
        "ClusterTrain": "cluster_train",
        "DomainMaintenance": "domain_maintenance",
        "CapacityArbiter": "capacity_arbiter",
        "BulkOperation": "bulk_operation",
        "ClusterOperation": "cluster_operation",
        "Campaign": "campaign",
    }.get(workflow_type(history), workflow_type(history).lower())
    if kind == "domain_maintenance":
        kind += "_quarantine" if f"{kind}_quarantine" not in taken else "_evict"
    elif kind == "cluster_train":
        kind += f"_run{sum(t.startswith(kind + '_run') for t in taken) + 1}"
    return kind


def write(histories: list[WorkflowHistory], names: list[str] | None = None) -> None:
    """Write ``histories`` and their manifest entries, named by kind (or by ``names``)."""
    HISTORIES.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    taken: set[str] = set()
    for i, history in enumerate(histories):
        name = names[i] if names else _name(history, taken)
        taken.add(name)
        compact = json.dumps(json.loads(history.to_json()), separators=(",", ":"))
        (HISTORIES / f"{name}.json").write_text(compact + "\n")
        manifest[f"{name}.json"] = {
            "workflow_id": history.workflow_id,
            "workflow_type": workflow_type(history),
            "events": len(history.events),
            "commands": command_sequence(history),
        }
        print(f"wrote {name}.json: {len(history.events)} events", file=sys.stderr)
    manifest = {k: manifest[k] for k in sorted(manifest) if (HISTORIES / k).exists()}
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")


async def main() -> None:
    from orchestrator.contracts.paths import temporal_cli_path
    from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    )
    try:
        with tempfile.TemporaryDirectory() as home:
            histories = await run_train(env.client, Path(home))
    finally:
        await env.shutdown()
    write(histories)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    asyncio.run(main())
