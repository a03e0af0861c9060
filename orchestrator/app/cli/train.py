"""``trainctl train``: start, inspect and steer a cluster's maintenance train.

The options are parsed and the status printed here; the Temporal calls are in
``orchestrator.train.client``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from pydantic import ValidationError
from temporalio.client import Client

from orchestrator.app.cli.common import (
    BadInput,
    cli_error,
    emit,
    emit_with_warnings,
    fail,
    handle_errors,
    json_option,
    open_fleet_or_fail,
    reason_option,
    task_queue_option,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.app.cli.report import cost_line, cost_of
from orchestrator.app.cli.train_checks import (
    check_change_against_fleet,
    check_cluster_in_fleet,
    check_spec_against_fleet,
    fit_change,
    fit_spec_to_cluster,
    merged_budget,
    parse_target_options,
    supersedes_options,
)
from orchestrator.contracts.schedule_window import parse_time_zone
from orchestrator.contracts.train_spec import load_train_spec, train_workflow_id
from orchestrator.contracts.train_types import TrainChange, TrainStatus
from orchestrator.contracts.ui_text import duration, explain_wait, plural, versions
from orchestrator.execution.target_checks import target_refusal
from orchestrator.planning.windows import edge_text
from orchestrator.train.client import (
    TrainAction,
    TrainNotFound,
    TrainRefused,
    WorkerNotAnswering,
    control_train,
    first_status,
    reconfigure_train,
    start_train,
    train_status,
)

T = TypeVar("T")
address_option = connection_options

_CLUSTER = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _cluster_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not _CLUSTER.match(value):
        raise click.BadParameter(
            f"{value[:40]!r} is not a cluster name (letters, digits, '.', '_', '-')", param=param
        )
    return value


cluster_option = click.option("--cluster", required=True, callback=_cluster_name)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def _client(address: str | None) -> Client:
    return await connect_or_fail(address)


async def _steer(coro: Awaitable[TrainStatus]) -> TrainStatus:
    """Await a call of the train client, its errors by the CLI's contract."""
    try:
        return await coro
    except (TrainRefused, TrainNotFound, WorkerNotAnswering) as err:
        # By the one mapping: refused and no such train exit 2, ended or not answering exit 1.
        raise cli_error(err) from None


def print_status(o: dict[str, Any]) -> None:
    state = "resting" if o.get("resting") and o["state"] == "running" else o["state"]
    click.echo(
        f"train-{o['cluster']}: {state}{' (' + o['reason'] + ')' if o['reason'] else ''}\n"
        f"{_progress(o)}\n"
        f"  domain size {o['domain_size']}, budget {_limits(o)}, "
        f"targets {versions(o['targets'])}\n"
        f"{_outlook(o)}"
        f"{_rollouts(o)}"
        f"{_window(o)}"
        f"{'  waiting: ' + explain_wait(o['waiting']) if o['waiting'] else ''}".rstrip("\n")
    )
    if line := cost_line(o.get("cost")):
        click.echo(line)


def _progress(o: dict[str, Any]) -> str:
    """``  cycle 1: 55/128 visited, ...``; a train that has not planned yet says so."""
    cycle = o["cycles_completed"] + 1
    if o.get("resting"):
        return (
            f"  resting after cycle {o['cycles_completed']}: every serving host on its targets "
            f"({o.get('checked_total', 0)} checked in place, {o['visits_total']} drained visits "
            "since it started)"
        )
    if not o["hosts_total"]:
        return f"  cycle {cycle}: started, choosing its first hosts"
    gone = o.get("hosts_visited_now_out", 0)
    since = f" ({gone} since quarantined or in repair)" if gone else ""
    return (
        f"  cycle {cycle}: {o['hosts_visited_this_cycle']}/{o['hosts_total']} visited{since}, "
        f"{o['in_maintenance']} in maintenance, {o['quarantined']} quarantined, "
        f"{o['in_repair']} in repair"
    )


def _rollouts(o: dict[str, Any]) -> str:
    """``  rollout campaign-x (stage s): bios 3.3 on every host``, one line per campaign riding."""
    lines = []
    for r in o.get("rollouts") or ([o["rollout"]] if o.get("rollout") else []):
        where = "every host" if r.get("hosts") is None else plural(len(r["hosts"]), "host")
        lines.append(
            f"  rollout {r['campaign']} (stage {r['stage']}): {versions(r['targets'])} on {where}\n"
        )
    return "".join(lines)


def _window(o: dict[str, Any]) -> str:
    """``  window: open until ...`` / ``waiting, next opens ...`` for a train with a schedule,
    in the schedule's time zone and in UTC."""
    state = o.get("window_state")
    if not state:
        return ""
    zone = parse_time_zone(o.get("time_zone") or "UTC")

    def when(key: str, never: str) -> str:
        at = o.get(key)
        return edge_text(datetime.fromisoformat(at), zone) if at else never

    if state == "open":
        return f"  window: open until {when('window_closes_at', '(no close in sight)')}\n"
    return f"  window: {state}, next opens {when('next_window_start', '(none in sight)')}\n"


def _limits(o: dict[str, Any]) -> str:
    """``floor 5% (153 hosts), maintenance 3% (92)``; the old one-limit form without the split."""
    b = o["budget"]
    if not b.get("maintenance") or not o.get("max_unavailable_hosts"):
        return str(b["max_unavailable"])
    return (
        f"floor {b['max_unavailable']} ({o['max_unavailable_hosts']} hosts), "
        f"maintenance {b['maintenance']} ({o['maintenance_hosts']})"
    )


def _outlook(o: dict[str, Any]) -> str:
    """The projected end of the cycle and, with a cycle_target, whether it is on track."""
    end = o.get("cycle_projected_end_hours")
    if end is None:
        return ""
    line = f"  cycle projected to end at fleet hour {end:,.1f}"
    began = o.get("cycle_started_hours")
    if began is not None:  # the target is a length: set the projected length beside it
        line += f", {duration(end - began)} after it began"
    target = o.get("cycle_target_hours")
    if target is not None:
        verdict = "on track" if o.get("cycle_on_track") else "OFF TRACK: evicting sooner"
        line += f" (target {duration(target)}: {verdict})"
    return line + "\n"


@click.group("train")
def train() -> None:
    """Maintenance trains: one long-running workflow per cluster."""


@train.command("start")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), required=True)
@task_queue_option
@address_option
@json_option
@handle_errors
def start(spec_path: Path, task_queue: str, address: str | None, as_json: bool) -> None:
    """Start the train described by a YAML spec."""
    spec = load_train_spec(spec_path)
    # A domain larger than the budget runs at the budget's size: said, and started so.
    spec, warnings = fit_spec_to_cluster(spec, check_spec_against_fleet(spec))

    async def go() -> TrainStatus:
        client = await _client(address)
        try:
            await start_train(client, spec, task_queue=task_queue)
        except Exception as err:  # WorkflowAlreadyStartedError and friends
            fail(f"cannot start {spec.workflow_id}: {err}")
        try:
            return await first_status(client, spec.cluster)
        except TrainNotFound as err:
            fail(str(err))
        except WorkerNotAnswering as err:
            fail(f"started {spec.workflow_id}; {err}")

    emit_with_warnings(run(go()).model_dump(mode="json"), warnings, as_json, print_status)


def _control(name: str, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @cluster_option
    @reason_option
    @address_option
    @json_option
    @handle_errors
    def cmd(cluster: str, address: str | None, as_json: bool, reason: str = "") -> None:
        check_cluster_in_fleet(cluster)

        async def go() -> TrainStatus:
            client = await _client(address)
            if name == "status":
                return await _steer(train_status(client, cluster))
            return await _steer(control_train(client, cluster, cast(TrainAction, name), reason))

        out = run(go()).model_dump(mode="json")
        if name == "status":  # what it cost the jobs, from the fleet's record as it is now
            out["cost"] = cost_of([train_workflow_id(cluster)]) or out.get("cost")
        emit(out, as_json, print_status)

    if name == "status":  # a query changes nothing, so there is no reason to give
        cmd.params = [p for p in cmd.params if p.name != "reason"]
    return cmd


for _name, _doc in (
    ("status", "Where the train stands: state, cycle, hosts visited, in maintenance."),
    ("pause", "Take no new hosts; hosts in maintenance finish."),
    ("resume", "Resume a paused or halted train."),
    ("stop", "Finish hosts in maintenance, hand everything back, end the train."),
):
    train.add_command(_control(_name, _doc))


@train.command("reconfigure")
@cluster_option
@click.option("--domain-size", type=click.IntRange(1, 10_000), default=None)
@click.option(
    "--budget",
    default=None,
    help="The floor (max_unavailable): hosts or percent out of service at once; the other "
    "budget fields stay as they are.",
)
@click.option(
    "--maintenance",
    default=None,
    help="Hosts or percent all planned work of the cluster may hold (budget.maintenance).",
)
@click.option("--per-rack", type=click.IntRange(1, 10_000), default=None, help="budget.per_rack")
@click.option("--per-zone", type=click.IntRange(1, 10_000), default=None, help="budget.per_zone")
@click.option("--target", "targets", multiple=True, help="component=version (repeatable).")
@click.option(
    "--supersedes",
    "superseded",
    multiple=True,
    help="component=version: the older target a --target replaces (it leaves the skew "
    "window's count; hosts not visited yet get the new one).",
)
@address_option
@json_option
@handle_errors
def reconfigure(
    cluster: str,
    domain_size: int | None,
    budget: str | None,
    maintenance: str | None,
    per_rack: int | None,
    per_zone: int | None,
    targets: tuple[str, ...],
    superseded: tuple[str, ...],
    address: str | None,
    as_json: bool,
) -> None:
    """Change domain size, budget or targets of a running train; the next visits use them.

    The train's budget and targets after the change go through the checks of `train start`.
    """
    pairs = parse_target_options(targets)
    supersedes = supersedes_options(superseded, pairs)
    given: dict[str, object] = {
        k: v
        for k, v in (
            ("max_unavailable", budget),
            ("maintenance", maintenance),
            ("per_rack", per_rack),
            ("per_zone", per_zone),
        )
        if v is not None
    }
    _check_change_fields(domain_size, given, pairs)
    check_cluster_in_fleet(cluster, domain_size)
    if pairs:
        _check_targets_for_fleet(cluster, pairs, supersedes)

    async def go() -> TrainStatus:
        client = await _client(address)
        current = await _steer(train_status(client, cluster))
        new_budget = merged_budget(current.budget, given) if given else None
        hosts = check_change_against_fleet(
            cluster, new_budget or current.budget, {**current.targets, **pairs}, current.hosts_total
        )
        change = TrainChange(domain_size=domain_size, budget=new_budget, targets=pairs or None)
        change, found = fit_change(change, current, hosts)
        warnings.extend(found)
        return await _steer(reconfigure_train(client, cluster, change))

    warnings: list[str] = []
    status = run(go()).model_dump(mode="json")
    emit_with_warnings(status, warnings, as_json, print_status)


def _check_change_fields(
    domain_size: int | None, given: dict[str, object], pairs: dict[str, str]
) -> None:
    """Each given field's own shape (errors name budget.<field>), before any connection; how
    they fit together is checked on the budget they make with the train's."""
    shape = {"max_unavailable": "100%", **given} if given else None
    try:
        TrainChange.model_validate(
            {"domain_size": domain_size, "budget": shape, "targets": pairs or None}
        )
    except ValidationError as err:  # named by where it is: budget.max_unavailable, ...
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "change"
        why = str(first["msg"]).removeprefix("Value error, ")
        raise BadInput(f"{where}: {why}", field=where) from None


def _check_targets_for_fleet(
    cluster: str, pairs: dict[str, str], supersedes: dict[str, str]
) -> None:
    """The same target rules as at start (the default skew window: the spec's is not here)."""
    fleet = open_fleet_or_fail()
    try:
        refused = target_refusal(fleet, [cluster], pairs, supersedes=supersedes)
    finally:
        fleet.close()
    if refused is not None:
        raise BadInput(refused[1], field=refused[0])


COMMANDS = [train]
