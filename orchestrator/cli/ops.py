"""``trainctl ops``: bulk operations (OpsPlanner) over many hosts at once.

``plan`` is a dry run: it peeks every cluster of the scope (read-only, nothing is written to the
fleet), plans waves and prints them with the impact. A refused plan exits 2 with the reason,
so automation gets a clear yes, no or plan. ``schema`` publishes the spec's JSON Schema.
``start`` plans first and starts nothing unless the plan is accepted; the workflow id comes from
the spec (``ops-<request_id>``), so the same request twice is one operation: a running one is
reported as ``already_running``, a finished one by its result. ``status``, ``pause``, ``resume``
and ``abort`` address the operation by that id (see ``orchestrator.cli.ops_exec``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.cli.common import BadInput, emit, fail, handle_errors, json_option
from orchestrator.fleet import SqliteFleet, open_fleet
from orchestrator.ops.spec import (
    OperationSpec,
    load_spec,
    operation_id,
    resolve_clusters,
    spec_json_schema,
)
from orchestrator.ops.types import FINAL_STATES, OpControl, OperationInput, OperationStatus
from orchestrator.planning.ops_plan import OperationPlan, holders_in, plan_operation
from orchestrator.planning.ops_snapshot import snapshot_cluster
from orchestrator.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
from orchestrator.worker import TASK_QUEUE

address_option = click.option(
    "--address", default=None, help="Temporal frontend (default $TEMPORAL_ADDRESS)."
)
id_option = click.option(
    "--id", "op_id", required=True, help="Operation id, ops-<request_id> (as `ops start` prints)."
)


@click.group("ops")
def ops() -> None:
    """Plan (and run) bulk operations: CUDA/driver upgrades, lower-layer updates, reboots."""


spec_option = click.option(
    "--spec",
    "spec_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Operation spec, YAML or JSON (see `trainctl ops schema`).",
)


def open_fleet_or_fail() -> SqliteFleet:
    try:
        return open_fleet()
    except FileNotFoundError as err:
        fail(str(err))


def plan_spec(fleet: SqliteFleet, spec: OperationSpec) -> OperationPlan:
    """Peek each cluster of the scope (read-only) and plan; ValueError naming ``scope``."""
    names = resolve_clusters(spec.scope, fleet.cluster_names())
    snaps = {name: snapshot_cluster(fleet.peek(name)) for name in names}
    return plan_operation(spec, snaps, holders_in(snaps.values()))


@ops.command("plan")
@spec_option
@json_option
@handle_errors
def plan(spec_path: Path, as_json: bool) -> None:
    """Dry run: waves, impact and estimated duration; changes nothing in the fleet."""
    spec = load_spec(spec_path)
    fleet = open_fleet_or_fail()
    try:
        result = plan_spec(fleet, spec)
    finally:
        fleet.close()
    if as_json or not result.refused:
        emit(result.model_dump(mode="json"), as_json, lambda _: click.echo(result.summary()))
    if result.refused:
        raise BadInput(f"refused: {result.refused}")


@ops.command("schema")
def schema() -> None:
    """Print the JSON Schema of an operation spec."""
    sys.stdout.write(json.dumps(spec_json_schema(), indent=2) + "\n")


# ---------------------------------------------------------------------- execution
async def _client(address: str | None) -> Client:
    from orchestrator.client import connect

    try:
        return await connect(address)
    except RuntimeError as err:
        fail(f"cannot reach Temporal ({err}); is `trainctl server` running?")


def _failed_status(op_id: str, err: WorkflowFailureError) -> OperationStatus:
    """The status a failed operation carries in its error, or a minimal one."""
    cause = err.cause
    details = cause.details if isinstance(cause, ApplicationError) else ()
    if details and isinstance(details[0], dict):
        return OperationStatus.model_validate(details[0])
    why = getattr(cause, "message", "") or str(cause)
    return OperationStatus(
        operation_id=op_id, kind="", targets={}, consistency="", state="failed", reason=why
    )


async def _final(handle: WorkflowHandle[Any, Any]) -> OperationStatus:
    try:
        result = await handle.result()
        return (
            result
            if isinstance(result, OperationStatus)
            else OperationStatus.model_validate(result)
        )
    except WorkflowFailureError as err:
        return _failed_status(handle.id, err)


async def _lookup(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionStatus | None:
    """The operation's execution status, None if there is no such workflow."""
    try:
        return (await handle.describe()).status
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _find(client: Client, op_id: str) -> tuple[WorkflowHandle[Any, Any], bool]:
    """(handle, running) of an operation named ``ops-<x>`` or just ``<x>``; exit 2 if none."""
    for wid in dict.fromkeys([op_id, op_id if op_id.startswith("ops-") else f"ops-{op_id}"]):
        handle = client.get_workflow_handle(wid, result_type=OperationStatus)
        found = await _lookup(handle)
        if found is not None:
            return handle, found == WorkflowExecutionStatus.RUNNING
    raise BadInput(f"id: no operation {op_id!r}")


async def _start(
    spec: OperationSpec, plan: OperationPlan, wait: bool, task_queue: str, address: str | None
) -> dict[str, Any]:
    """Start (or join, or report) the operation of ``spec``; its status as a dict."""
    from workflows.bulk_operation import BulkOperation

    client = await _client(address)
    op_id = operation_id(spec)
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(
        op_id, result_type=OperationStatus
    )
    found = await _lookup(handle)
    started = False
    if found is None:
        pairs = [
            SearchAttributePair(TRAIN_CAMPAIGN, op_id),
            SearchAttributePair(TRAIN_PHASE, "running"),
        ]
        if len(plan.clusters) == 1:
            pairs.append(SearchAttributePair(TRAIN_CLUSTER, plan.clusters[0].cluster))
        try:
            handle = await client.start_workflow(
                BulkOperation.run,
                OperationInput(spec=spec),
                id=op_id,
                task_queue=task_queue,
                # One operation per request: join a running one, never re-run a finished one.
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes(pairs),
                static_summary=f"{spec.kind} {dict(spec.targets)} over {spec.scope.cluster}",
            )
            response = getattr(handle, "_start_workflow_response", None)
            started = bool(getattr(response, "started", True))
            found = WorkflowExecutionStatus.RUNNING
        except WorkflowAlreadyStartedError:  # it finished between our look and our start
            found = WorkflowExecutionStatus.COMPLETED
    running = found == WorkflowExecutionStatus.RUNNING
    run_id = (await handle.describe()).run_id
    status = await _final(handle) if wait or not running else None
    out: dict[str, Any] = (
        status.model_dump(mode="json") if status else {"operation_id": op_id, "state": "running"}
    )
    out.update(
        run_id=run_id,
        started=started,
        already_running=running and not started,
        plan={
            "waves": len(plan.waves),
            "hosts_to_change": plan.hosts_to_change,
            "estimated_duration_hours": plan.estimated_duration_hours,
            "conflicts": plan.conflicts,
        },
    )
    return out


def print_status(o: dict[str, Any]) -> None:
    why = f" ({o['reason']})" if o.get("reason") else ""
    click.echo(f"{o['operation_id']}: {o['state']}{why}")
    if "waves_done" in o:
        click.echo(
            f"  {o['waves_done']}/{o['waves_total']} waves, {o['hosts_changed']} hosts changed, "
            f"{o['hosts_rolled_back']} rolled back, {o['hosts_quarantined']} quarantined, "
            f"{o['hosts_deferred']} deferred until repaired"
        )
    for c in o.get("clusters", {}).values():
        wait = f", waiting for {', '.join(c['waiting_for'])}" if c["waiting_for"] else ""
        click.echo(
            f"  {c['cluster']}: {c['state']}, {c['waves_done']}/{c['waves_total']} waves, "
            f"{c['hosts_changed']} changed{wait}{' - ' + c['reason'] if c['reason'] else ''}"
        )
    if plan := o.get("plan"):
        click.echo(
            f"  plan: {plan['waves']} waves, {plan['hosts_to_change']} hosts to change, "
            f"~{plan['estimated_duration_hours']:.1f} fleet hours"
        )
    if o.get("already_running"):
        click.echo("  already running: the same request was started before")
    if o.get("started") and o["state"] == "running":
        click.echo(f"  started; follow it with `trainctl ops status --id {o['operation_id']}`")


@ops.command("start")
@spec_option
@click.option("--wait", is_flag=True, help="Wait for the end; exit 1 unless it succeeded.")
@click.option("--task-queue", default=TASK_QUEUE, show_default=True, help="The workers' queue.")
@address_option
@json_option
@handle_errors
def start(spec_path: Path, wait: bool, task_queue: str, address: str | None, as_json: bool) -> None:
    """Plan, then run a bulk operation; the same request_id twice is one operation."""
    spec = load_spec(spec_path)
    fleet = open_fleet_or_fail()
    try:
        plan = plan_spec(fleet, spec)
    finally:
        fleet.close()
    if plan.refused:
        if as_json:
            emit(
                {"operation_id": plan.operation_id, "started": False, "refused": plan.refused},
                True,
                print_status,
            )
        raise BadInput(f"refused: {plan.refused}")
    out = asyncio.run(_start(spec, plan, wait, task_queue, address))
    emit(out, as_json, print_status)
    if out["state"] in FINAL_STATES and out["state"] != "succeeded":
        fail(f"{out['operation_id']} {out['state']}: {out.get('reason', '')}")


def _control(name: str, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @id_option
    @click.option("--reason", default="")
    @address_option
    @json_option
    @handle_errors
    def cmd(op_id: str, reason: str, address: str | None, as_json: bool) -> None:
        async def go() -> OperationStatus:
            handle, running = await _find(await _client(address), op_id)
            if not running:
                if name != "status":
                    state = (await _final(handle)).state
                    raise BadInput(f"{name}: operation {handle.id} has ended ({state})")
                return await _final(handle)
            if name == "status":
                return await handle.query("status", result_type=OperationStatus)
            try:
                return await handle.execute_update(
                    name, OpControl(reason=reason), result_type=OperationStatus
                )
            except WorkflowUpdateFailedError as err:
                raise BadInput(f"{name}: {getattr(err.cause, 'message', err.cause)}") from None

        emit(asyncio.run(go()).model_dump(mode="json"), as_json, print_status)

    return cmd


for _name, _doc in (
    ("status", "Where an operation stands: state, waves, hosts changed, who it waits for."),
    ("pause", "Finish the waves in progress, start no more; the budget goes back to trains."),
    ("resume", "Resume a paused operation."),
    ("abort", "Stop after the waves in progress are safely done; every host old or new."),
):
    ops.add_command(_control(_name, _doc))

COMMANDS = [ops]
