"""``trainctl ops``: bulk operations (OpsPlanner) over many hosts at once.

``plan`` is a dry run: it peeks every cluster of the scope (read-only, nothing is written to the
fleet), plans waves and prints them with the impact. A refused plan exits 2 with the reason,
so automation gets a clear yes, no or plan. ``schema`` publishes the spec's JSON Schema.
``start`` plans first and starts nothing unless the plan is accepted; the workflow id comes from
the spec (``ops-<request_id>``), so the same request twice is one operation: a running one is
reported as ``already_running``, a finished one by its result. ``status``, ``pause``, ``resume``
and ``abort`` address the operation by that id. Everything that talks to Temporal is in
``orchestrator.ops.client``; this module parses options, calls it and prints.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click
from temporalio.client import Client
from temporalio.service import RPCError

from orchestrator.app.cli.approve import ops_approve
from orchestrator.app.cli.common import (
    BadInput,
    CliError,
    OperationFailed,
    cron_option,
    emit,
    field_of,
    handle_errors,
    json_option,
    open_fleet_or_fail,
    reason_option,
    task_queue_option,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.app.cli.report import cost_line, cost_of
from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.ops_spec import (
    OperationSpec,
    load_spec,
    spec_json_schema,
)
from orchestrator.contracts.ops_types import (
    FINAL_STATES,
    ClusterProgress,
    ControlAction,
    OperationStatus,
)
from orchestrator.contracts.ui_text import duration, explain_wait, plural
from orchestrator.contracts.views import ClusterSnapshot
from orchestrator.execution.ops_take import plan_scope
from orchestrator.execution.target_checks import target_refusal
from orchestrator.ops.client import (
    OperationNotFound,
    OperationStart,
    arbiter_grants,
    control_operation,
    find_operation,
    operation_status,
    start_operation,
)
from orchestrator.planning.ops_plan import OperationPlan, holders_in, plan_operation, with_grants

address_option = connection_options
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


def plan_spec(
    fleet: FleetBackend,
    spec: OperationSpec,
    grants: Callable[[OperationPlan], dict[str, int | None] | None] | None = None,
) -> OperationPlan:
    """Peek each cluster of the scope (read-only) and plan; ValueError naming ``scope``.

    ``grants``, given the plan at the spec's budget, says what each cluster's capacity arbiter
    would grant (None: nobody answered); the plan is then cut again in waves of that size.
    """

    def check(names: list[str], snaps: dict[str, ClusterSnapshot]) -> None:
        # Bad versions, and the skew window with the spec's own limits and what it supersedes.
        refused = target_refusal(fleet, names, spec.targets, spec.skew, spec.supersedes)
        if refused is not None:
            raise BadInput(refused[1], field=refused[0])
        for snap in snaps.values():  # one budget rule: maintenance never above the floor
            try:
                spec.budget.check_maintenance(snap.hosts_total)
            except ValueError as err:
                raise BadInput(str(err), field="budget.maintenance") from None
            if spec.window is None:  # a budget of no host never starts a wave (a window's may)
                try:
                    spec.budget.require_hosts(snap.hosts_total)
                except ValueError as err:
                    raise BadInput(str(err)) from None

    scoped = plan_scope(fleet, spec, check=check)
    result = scoped.plan
    if grants is None or result.refused:
        return result
    granted = grants(result)
    if granted is None:
        result.warnings.append(
            "granted_hosts: no Temporal server answered, so the waves are cut at the spec's "
            "budget; when it runs, each cluster's capacity arbiter grants the operation its "
            "share (a train's smaller budget, say), and the waves may be smaller"
        )
        return result
    # Cut again only where a grant is smaller than the waves: otherwise they stand as planned.
    regranted = with_grants(result, spec, granted)
    if regranted is None:
        holders = holders_in(scoped.snapshots.values())
        regranted = plan_operation(spec, scoped.snapshots, holders, grants=granted)
    result = regranted
    if silent := sorted(c for c, g in granted.items() if g is None):
        result.warnings.append(
            f"granted_hosts: the capacity arbiter of {', '.join(silent)} did not answer (is a "
            "worker running?), so those waves are cut at the spec's budget and may be smaller"
        )
    return result


def _ask_arbiters(
    address: str | None, task_queue: str
) -> Callable[[OperationPlan], dict[str, int | None] | None]:
    """What each cluster's arbiter would grant the plan's operation now; None if no server
    answers (a bad connection setting still exits 2)."""

    def ask(plan: OperationPlan) -> dict[str, int | None] | None:
        limits = {c.cluster: c.budget_limit for c in plan.clusters if c.hosts_in_scope}

        async def go() -> dict[str, int | None] | None:
            try:
                client = await _client(address)
            except OperationFailed:  # nobody answers at that address
                return None
            return await arbiter_grants(client, plan.operation_id, limits, task_queue)

        try:
            return asyncio.run(asyncio.wait_for(go(), PLAN_ASK_SECONDS))
        except (TimeoutError, RPCError, RuntimeError):  # no answer (or no loop to ask from)
            return None

    return ask


#: How long ``ops plan`` waits for the arbiters' answers before planning without them.
PLAN_ASK_SECONDS = 20.0


@ops.command("plan")
@spec_option
@task_queue_option
@address_option
@json_option
@handle_errors
def plan(spec_path: Path, task_queue: str, address: str | None, as_json: bool) -> None:
    """Dry run: waves, impact and estimated duration; changes nothing in the fleet.

    It asks each cluster's capacity arbiter what it would grant the operation now (a query)
    and cuts the waves to that size (``granted_hosts``); with no server answering, at the
    spec's budget (``granted_hosts: null``), and says the waves may be smaller.
    """
    spec = load_spec(spec_path)
    fleet = open_fleet_or_fail()
    try:
        result = plan_spec(fleet, spec, _ask_arbiters(address, task_queue))
    finally:
        fleet.close()
    if result.refused:  # under --json: one object, the error and the plan that was refused
        raise refusal(result.refused, result.model_dump(mode="json"))
    emit(result.model_dump(mode="json"), as_json, lambda _: click.echo(result.summary()))


def refusal(reason: str, extra: dict[str, Any]) -> BadInput:
    """A refused plan by the error contract: exit 2 naming the field the reason names."""
    return BadInput(f"refused: {reason}", field=field_of(reason), extra=extra)


@ops.command("schema")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on one line.")
def schema(as_json: bool) -> None:
    """Print the JSON Schema of an operation spec (the same as `trainctl schema operation`)."""
    sys.stdout.write(json.dumps(spec_json_schema(), indent=None if as_json else 2) + "\n")


# ---------------------------------------------------------------------- execution
async def _client(address: str | None) -> Client:
    return await connect_or_fail(address)


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
        why = f" - {explain_wait(c['reason'])}" if c["reason"] else ""
        click.echo(
            f"  {c['cluster']}: {c['state']}, {c['waves_done']}/{c['waves_total']} waves, "
            f"{c['hosts_changed']} changed{wait}{why}"
        )
        for note in c.get("replans") or ([c["plan_note"]] if c.get("plan_note") else []):
            click.echo(f"    {note}")
    if plan := o.get("plan"):
        hosts = plural(plan.get("hosts_in_waves", plan["hosts_to_change"]), "host")
        click.echo(
            f"  plan: {hosts} to change in {plural(plan['waves'], 'wave')}, "
            f"{plan.get('deferred', 0):,} deferred until repaired, "
            f"~{duration(plan['estimated_duration_hours'])} of fleet time"
        )
    if line := cost_line(o.get("cost")):
        click.echo(line)
    if o.get("already_running"):
        click.echo("  already running: the same request was started before")
    if o.get("started") and o["state"] == "running":
        click.echo(f"  started; follow it with `trainctl ops status --id {o['operation_id']}`")


@ops.command("start")
@spec_option
@click.option("--wait", is_flag=True, help="Wait for the end; exit 1 unless it succeeded.")
@task_queue_option
@cron_option
@address_option
@json_option
@handle_errors
def start(
    spec_path: Path,
    wait: bool,
    task_queue: str,
    cron: str | None,
    address: str | None,
    as_json: bool,
) -> None:
    """Plan, then run a bulk operation; the same request_id twice is one operation.

    With --cron, create a Temporal Schedule instead that starts it as a new operation each time.
    """
    spec = load_spec(spec_path)
    if cron is not None:
        from orchestrator.infra.schedules import check_cron

        cron = check_cron(cron)
        if wait:
            raise BadInput("wait: a recurring operation (--cron) has no end to wait for")
    fleet = open_fleet_or_fail()
    try:
        plan = plan_spec(fleet, spec, None if cron else _ask_arbiters(address, task_queue))
    finally:
        fleet.close()
    if plan.refused and (cron is not None or not _exists(address, plan.operation_id)):
        raise refusal(
            plan.refused,
            {"operation_id": plan.operation_id, "started": False, "refused": plan.refused},
        )

    if cron is not None:
        _start_schedule(spec, plan, cron, task_queue, address, as_json)
        return

    async def go() -> OperationStart:
        clusters = [c.cluster for c in plan.clusters]
        return await start_operation(
            await _client(address), spec, clusters=clusters, task_queue=task_queue, wait=wait
        )

    out = start_answer(spec, plan, asyncio.run(go()))
    if out["state"] in FINAL_STATES and out["state"] != "succeeded":
        if not as_json:
            print_status(out)
        raise OperationFailed(
            f"{out['operation_id']} {out['state']}: {out.get('reason', '')}", extra=out
        )
    emit(out, as_json, print_status)


def start_answer(
    spec: OperationSpec, plan: OperationPlan, result: OperationStart
) -> dict[str, Any]:
    """What ``ops start`` answers: always the operation's status (the same fields, first start
    or repeat), the live or final one, or, until its workflow has planned its clusters, the one
    it begins with (a repeat asked early answered ``waves_total: 0``), and the plan's figures
    as ``ops plan`` gives them (hosts in waves, deferred ones apart). A repeat of an operation
    that has planned answers its own waves alone: a plan made now counts only what is left
    (``48 hosts in 3 waves`` beside the operation's ``0/4 waves``)."""
    status = result.status
    planned = status is not None and (bool(status.clusters) or status.state in FINAL_STATES)
    if status is None or not planned:
        live = status
        status = _starting_status(spec, plan)
        if live is not None:  # paused or aborting before it planned: say so
            status.state, status.reason = live.state, live.reason
    out: dict[str, Any] = status.model_dump(mode="json")
    out.update(run_id=result.run_id, started=result.started, already_running=result.already_running)
    if not (planned and not result.started):
        out["plan"] = {
            "waves": len(plan.waves),
            "hosts_to_change": plan.hosts_to_change,
            "hosts_in_waves": sum(len(w.hosts) for w in plan.waves),
            "deferred": len(plan.deferred),
            "estimated_duration_hours": plan.estimated_duration_hours,
            "conflicts": plan.conflicts,
        }
    return out


def _exists(address: str | None, op_id: str) -> bool:
    """Whether operation ``op_id`` exists (so a repeat joins it, whatever the plan says now);
    False when no server answers: the refusal stands."""

    async def go() -> bool:
        try:
            await find_operation(await _client(address), op_id)
        except (OperationNotFound, CliError):
            return False
        return True

    try:
        return asyncio.run(go())
    except Exception:  # no server, no answer: judge the plan alone
        return False


def _starting_status(spec: OperationSpec, plan: OperationPlan) -> OperationStatus:
    """The status of an operation just started, before its workflow has looked at the fleet."""
    op_id = plan.operation_id
    return OperationStatus(
        operation_id=op_id,
        kind=spec.kind,
        targets=dict(spec.targets),
        consistency=spec.consistency,
        state="running",
        waves_total=len(plan.waves),
        clusters={
            c.cluster: ClusterProgress(
                cluster=c.cluster,
                workflow_id=f"{op_id}-{c.cluster}",
                waves_total=c.waves,
                hosts_in_scope=c.hosts_in_scope,
                already_done=c.already_done,
            )
            for c in plan.clusters
            if c.hosts_in_scope
        },
    )


def _start_schedule(
    spec: OperationSpec,
    plan: OperationPlan,
    cron: str,
    task_queue: str,
    address: str | None,
    as_json: bool,
) -> None:
    from orchestrator.app.cli.schedule import print_schedule
    from orchestrator.ops.schedule import schedule_operation

    async def go() -> dict[str, Any]:
        clusters = [c.cluster for c in plan.clusters]
        view = await schedule_operation(
            await _client(address), spec, cron=cron, clusters=clusters, task_queue=task_queue
        )
        return view.model_dump(mode="json")

    emit(asyncio.run(go()), as_json, print_schedule)


def _control(name: str, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @id_option
    @reason_option
    @address_option
    @json_option
    @handle_errors
    def cmd(op_id: str, address: str | None, as_json: bool, reason: str = "") -> None:
        async def go() -> OperationStatus:
            client = await _client(address)
            if name == "status":
                return await operation_status(client, op_id)
            return await control_operation(client, op_id, cast(ControlAction, name), reason)

        out = asyncio.run(go()).model_dump(mode="json")
        if name == "status":  # what it cost the jobs, from the fleet's record
            out["cost"] = cost_of([out["operation_id"]])
        emit(out, as_json, print_status)

    if name == "status":  # a query changes nothing, so there is no reason to give
        cmd.params = [p for p in cmd.params if p.name != "reason"]
    return cmd


for _name, _doc in (
    ("status", "Where an operation stands: state, waves, hosts changed, who it waits for."),
    ("pause", "Finish the waves in progress, start no more; the budget goes back to trains."),
    ("resume", "Resume a paused operation."),
    ("abort", "Stop after the waves in progress are safely done; every host old or new."),
):
    ops.add_command(_control(_name, _doc))
ops.add_command(ops_approve)

COMMANDS = [ops]
