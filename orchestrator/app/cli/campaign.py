"""``trainctl campaign``: plan, start, inspect and steer campaigns.

``plan`` is a dry run against the fleet: the stages resolved (which clusters, how many hosts,
the gates), nothing started. ``start`` checks the same plan first, so a spec naming no cluster
exits 2 naming the field before anything runs; with ``--wait`` it exits 0 when the campaign
succeeded and 1 when it failed, was aborted or rolled back. ``status``, ``pause``, ``resume``
and ``abort`` take ``--id`` (``campaign-<name>`` or the bare name) or ``--spec``. The Temporal
calls are in ``orchestrator.campaign.client``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from orchestrator.app.cli.approve import campaign_approve
from orchestrator.app.cli.common import (
    BadInput,
    cron_option,
    emit,
    emit_with_warnings,
    handle_errors,
    json_option,
    open_fleet_or_fail,
    reason_option,
    task_queue_option,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.app.cli.report import cost_line, cost_of
from orchestrator.campaign.client import (
    campaign_status,
    control_campaign,
    resolve_id,
    start_campaign,
)
from orchestrator.campaign.estimate import StageEstimate, estimate_stages
from orchestrator.campaign.ui import next_command, rolled_back_hosts
from orchestrator.contracts.campaign_spec import CampaignSpec, load_campaign_spec
from orchestrator.contracts.campaign_types import CampaignStatus
from orchestrator.contracts.ui_text import duration, plural
from orchestrator.execution.target_checks import target_refusal
from orchestrator.fleet.presets import PRESETS
from orchestrator.planning.campaign_plan import StagePlan, failure_limit, plan_campaign
from orchestrator.planning.spec_fit import fit_train

address_option = connection_options
spec_option = click.option(
    "--spec",
    "spec_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Campaign spec, YAML or JSON.",
)
id_option = click.option("--id", "campaign_id", help="campaign-<name> (or the name).")


@click.group("campaign")
def campaign() -> None:
    """Roll one change over clusters in stages: canary, a cluster, the rest, with gates."""


def _plan(spec: CampaignSpec) -> tuple[list[StagePlan], dict[str, int]]:
    """The stages resolved and the hosts of each cluster they cover, the targets checked on
    every such cluster (a bad version, or one version more in service than the skew window
    allows) and the train block's budget on each (at least one host): exit 2 naming the field
    before anything starts."""
    fleet = open_fleet_or_fail()
    try:
        sizes = {c: fleet.hosts_in(c) for c in fleet.cluster_names()}
        try:
            plans = plan_campaign(spec, sizes)
            covered = sorted({c for p in plans for c in p.clusters})
            for c in covered:
                spec.train.budget.require_hosts(sizes[c], "train.budget.max_unavailable")
        except ValueError as err:
            raise BadInput(str(err)) from None
        refused = target_refusal(fleet, covered, spec.targets, spec.skew, spec.supersedes)
    finally:
        fleet.close()
    if refused is not None:
        raise BadInput(refused[1], field=refused[0])
    return plans, {c: sizes[c] for c in covered}


def _fit_train_block(spec: CampaignSpec, sizes: dict[str, int]) -> tuple[CampaignSpec, list[str]]:
    """``spec`` with its train block's domain clamped to its budget on the smallest cluster it
    covers (as ``train start`` clamps a train's), and a warning per clamp, naming its clusters."""
    train = spec.train
    fits = {
        c: fit_train(train.domain_size, train.budget, n, spec.targets) for c, n in sizes.items()
    }
    by_text: dict[str, list[str]] = {}
    for cluster, fit in fits.items():
        for text in fit.warnings:
            by_text.setdefault(text, []).append(cluster)
    warnings = [f"train on {', '.join(cs)}: {text}" for text, cs in by_text.items()]
    domain = min((f.domain.effective for f in fits.values()), default=train.domain_size)
    if domain < train.domain_size:
        spec = spec.model_copy(update={"train": train.model_copy(update={"domain_size": domain})})
    return spec, warnings


def _plan_json(spec: CampaignSpec, plans: list[StagePlan]) -> dict[str, Any]:
    return {
        "campaign_id": spec.workflow_id,
        "targets": spec.targets,
        "stages": [
            {
                "name": p.name,
                "clusters": list(p.clusters),
                "hosts": p.hosts_total,
                "hosts_per_cluster": p.hosts_per_cluster,
                "partial": p.partial,
                "bake_hours": p.bake_hours,
                "parallel": p.parallel,
                "max_failures": failure_limit(p.gates, p.hosts_total),
                "prometheus": p.gates.prometheus.query if p.gates.prometheus else None,
            }
            for p in plans
        ],
    }


def _print_plan(obj: dict[str, Any]) -> None:
    click.echo(f"{obj['campaign_id']}: " + ", ".join(f"{c} {v}" for c, v in obj["targets"].items()))
    for s in obj["stages"]:
        gate = "base-rate rule" if s["max_failures"] is None else f"<= {s['max_failures']} failed"
        bake = f"bake {duration(s['bake_hours'])}" if s["bake_hours"] else "no bake"
        click.echo(
            f"  {s['name']}: {', '.join(s['clusters']) or 'nothing left'} "
            f"({plural(s['hosts'], 'host')}, {plural(s['parallel'], 'cluster')} at a time), "
            f"{bake}, gate {gate}"
            + (f", prometheus {s['prometheus']!r}" if s["prometheus"] else "")
        )
        for line in _estimate_lines(s.get("estimate")):
            click.echo(f"    {line}")


def _estimate_lines(e: dict[str, Any] | None) -> list[str]:
    """A stage's estimate for people: its operations' ranges, the train's simulate command."""
    if not e:
        return []
    lines = []
    if e["jobs_interrupted_range"] is not None:
        lost = e["gpu_hours_lost_range"]
        what = "operations" if e["runs_as"] == "operation" else "operations after the train"
        lines.append(
            f"estimate ({what}): {_hours(e['estimated_duration_range_hours'])}, "
            f"{_jobs(e['jobs_interrupted_range'])} interrupted, "
            f"{_span([f'{x:,.0f}' for x in lost])} GPU-hours of work lost"
        )
        for o in e["operations"]:
            if o["refused"]:
                lines.append(f"  {o['cluster']}: refused: {o['refused']}")
                continue
            lines.append(
                f"  {o['cluster']}: {plural(o['hosts_to_change'], 'host')} in "
                f"{plural(o['waves'], 'wave')}, {_hours(o['estimated_duration_range_hours'])}, "
                f"{_jobs(o['jobs_interrupted_range'])} interrupted"
            )
    if e["train_estimate"]:
        lines.append(
            "train: its cycle's cost is estimated by the simulator (a whole cluster at the "
            f"train's budget): {e['train_estimate']}"
        )
    return lines


def _span(pair: list[str]) -> str:
    """``a to b``, or ``a`` when both ends are the same."""
    return pair[0] if pair[0] == pair[1] else f"{pair[0]} to {pair[1]}"


def _hours(r: list[float]) -> str:
    return _span([duration(h) for h in r])


def _jobs(r: list[int]) -> str:
    return plural(r[1], "job") if r[0] == r[1] else f"{r[0]} to {plural(r[1], 'job')}"


def progress_line(st: CampaignStatus) -> str:
    """One line of a waiting campaign's progress: its stage, hosts changed, failures."""
    stage = next((s for s in st.stages if s.name == st.stage), None)
    where = "starting" if stage is None else f"stage {stage.name} {stage.state}"
    line = f"{st.campaign_id}: {st.state}, {where}"
    if stage is not None:
        line += f", {stage.hosts_changed} of {stage.hosts_planned} hosts changed"
        line += f", {stage.failures} failed"
        if stage.state == "baking" and stage.bake_remaining_hours:
            line += f", bake {duration(stage.bake_remaining_hours)} left"
    return line + (f" ({st.reason})" if st.reason else "")


def _progress_printer() -> Callable[[CampaignStatus], None]:
    """Print each new progress line on stderr (stdout stays the final answer, JSON or not)."""
    last = [""]

    def show(st: CampaignStatus) -> None:
        line = progress_line(st)
        if line != last[0]:
            click.echo(line, err=True)
            last[0] = line

    return show


def _print_status(obj: dict[str, Any]) -> None:
    click.echo(
        f"{obj['campaign_id']}: {obj['state']} ({obj['reason'] or obj['stage']}); "
        f"{obj['hosts_changed']} changed, {obj['hosts_quarantined']} quarantined, "
        f"{obj['hosts_rolled_back']} rolled back"
    )
    for s in obj["stages"]:
        limit = s["failure_limit"]
        gate = "no limit yet" if limit is None else f"the gate allows at most {limit}"
        bake = s["bake_remaining_hours"]
        click.echo(
            f"  {s['name']}: {s['state']}, {s['hosts_changed']}/{s['hosts_planned']} changed, "
            f"{s['failures']} failed ({gate})"
            + (f", bake {duration(bake)} left" if bake else "")
            + (f" ({s['reason']})" if s["reason"] else "")
        )
    for g in obj.get("approvals", []):
        who = (
            f" by {g['approver']} (client identity {g['identity'] or '-'})" if g["approver"] else ""
        )
        click.echo(f"  approval {g['stage']}/{g['gate']}: {g['state']}{who}; {g['command']}")
    if line := cost_line(obj.get("cost")):
        click.echo(line)
    for line in _closing_lines(CampaignStatus.model_validate(obj)):
        click.echo(line)


def _closing_lines(st: CampaignStatus) -> list[str]:
    """What a rollback put back and the command that moves the campaign on, as on its page."""
    bad = {c: v for s in st.stages for cs in s.clusters.values() for c, v in cs.marked_bad.items()}
    lines = []
    if st.state == "rolled_back":
        marked = ", ".join(f"{c} {v}" for c, v in sorted(bad.items())) or "the blamed version"
        lines.append(
            f"  rolled back: {rolled_back_hosts(st)} to their previous versions; "
            f"{marked} marked bad fleet-wide"
        )
    step = next_command(st.name, st.state, st.held_on_blame, bad)
    if step:
        lines.append(f"  next: {step.replace('`', '')}")
    return lines


def _load(spec_path: Path | None, campaign_id: str | None) -> tuple[CampaignSpec | None, str]:
    if spec_path is None and not campaign_id:
        raise BadInput("id: give --id or --spec", field="id")
    if spec_path is not None:
        spec = load_campaign_spec(spec_path)
        return spec, spec.workflow_id
    return None, resolve_id(str(campaign_id))


def _outcome(status: CampaignStatus, as_json: bool, warnings: list[str]) -> None:
    emit_with_warnings(status.model_dump(mode="json"), warnings, as_json, _print_status)
    if status.state in ("failed", "aborted", "rolled_back") or status.held_on_blame:
        raise click.exceptions.Exit(1)


@campaign.command("plan")
@click.option(
    "--spec",
    "spec_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Campaign spec, YAML or JSON.",
)
@json_option
@handle_errors
def plan(spec_path: Path, as_json: bool) -> None:
    """Dry run: the stages resolved against the fleet, and what each is expected to cost the
    jobs (driver/CUDA operations as `ops plan` plans them; a train's cycle: the `simulate`
    command that estimates it); nothing starts."""
    spec = load_campaign_spec(spec_path)
    plans, sizes = _plan(spec)
    fleet = open_fleet_or_fail(read_only=True)
    try:
        snaps = {c: fleet.peek(c).snapshot() for c in sizes}
        shape = fleet.preset
    finally:
        fleet.close()
    # A train's cycle is simulated on this fleet's preset, or (Slurm) the one nearest its size.
    preset = shape.name
    if preset not in PRESETS:
        near = min(
            PRESETS.values(), key=lambda p: abs(p.hosts_per_cluster - shape.hosts_per_cluster)
        )
        preset = near.name
    estimates = estimate_stages(spec, plans, snaps, preset, preset == shape.name)
    out = _plan_json(spec, plans)
    for stage, est in zip(out["stages"], estimates, strict=True):
        stage["estimate"] = _estimate_json(est)
    emit(out, as_json, _print_plan)


def _estimate_json(est: StageEstimate) -> dict[str, Any]:
    def pair(r: tuple[float, float] | None) -> list[float] | None:
        return None if r is None else list(r)

    return {
        "runs_as": est.runs_as,
        "jobs_interrupted_range": pair(est.jobs_interrupted_range),
        "gpu_hours_lost_range": pair(est.gpu_hours_lost_range),
        "estimated_duration_range_hours": pair(est.estimated_duration_range_hours),
        "operations": [
            {
                "cluster": o.cluster,
                "operation_id": o.operation_id,
                "hosts": o.hosts,
                "hosts_to_change": o.hosts_to_change,
                "waves": o.waves,
                "jobs_interrupted_range": list(o.jobs_interrupted_range),
                "gpu_hours_lost_range": list(o.gpu_hours_lost_range),
                "estimated_duration_range_hours": list(o.estimated_duration_range_hours),
                "refused": o.refused,
            }
            for o in est.operations
        ],
        "train_estimate": est.simulate,
    }


@campaign.command("start")
@click.option(
    "--spec",
    "spec_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Campaign spec, YAML or JSON.",
)
@click.option("--wait", is_flag=True, help="Wait for the end: exit 0 succeeded, 1 otherwise.")
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
    """Start (or join) the campaign of a spec; with --cron, a Schedule that starts it each time."""
    spec = load_campaign_spec(spec_path)
    if cron is not None:
        from orchestrator.infra.schedules import check_cron

        cron = check_cron(cron)
        if wait:
            raise BadInput("wait: a recurring campaign (--cron) has no end to wait for")
    spec, warnings = _fit_train_block(spec, _plan(spec)[1])
    if cron is not None:
        _start_schedule(spec, cron, task_queue, address, as_json, warnings)
        return

    async def go() -> Any:
        client = await connect_or_fail(address)
        if wait:  # stdout stays the final answer; what it waits for goes to stderr
            click.echo(f"{spec.workflow_id}: waiting for it to end", err=True)
        return await start_campaign(
            client, spec, task_queue=task_queue, wait=wait, on_progress=_progress_printer()
        )

    started = asyncio.run(go())
    if wait and started.status is not None:
        _outcome(started.status, as_json, warnings)
        return
    emit_with_warnings(started.model_dump(mode="json"), warnings, as_json, _print_started)


def _print_started(o: dict[str, Any]) -> None:
    click.echo(f"{o['campaign_id']}: {'started' if o['started'] else 'already running'}")
    if o.get("status"):
        click.echo("  " + progress_line(CampaignStatus.model_validate(o["status"])))


def _start_schedule(
    spec: CampaignSpec,
    cron: str,
    task_queue: str,
    address: str | None,
    as_json: bool,
    warnings: list[str],
) -> None:
    from orchestrator.app.cli.schedule import print_schedule
    from orchestrator.campaign.schedule import schedule_campaign

    async def go() -> dict[str, Any]:
        client = await connect_or_fail(address)
        view = await schedule_campaign(client, spec, cron=cron, task_queue=task_queue)
        return view.model_dump(mode="json")

    emit_with_warnings(asyncio.run(go()), warnings, as_json, print_schedule)


@campaign.command("status")
@spec_option
@id_option
@address_option
@json_option
@handle_errors
def status(
    spec_path: Path | None, campaign_id: str | None, address: str | None, as_json: bool
) -> None:
    """Where a campaign stands: per stage and in total."""
    _, cid = _load(spec_path, campaign_id)

    async def go() -> CampaignStatus:
        client = await connect_or_fail(address)
        return await campaign_status(client, cid)  # no such campaign: exit 2 naming id

    st = asyncio.run(go())
    out = st.model_dump(mode="json")
    # What it cost the jobs, from the fleet's record: its own holds and its operations'.
    ops = [cs.operation_id for s in st.stages for cs in s.clusters.values() if cs.operation_id]
    out["cost"] = cost_of([cid, *ops])
    emit(out, as_json, _print_status)


def _control(action: str) -> click.Command:
    @spec_option
    @id_option
    @reason_option
    @address_option
    @json_option
    @handle_errors
    def command(
        spec_path: Path | None,
        campaign_id: str | None,
        reason: str,
        address: str | None,
        as_json: bool,
    ) -> None:
        _, cid = _load(spec_path, campaign_id)

        async def go() -> CampaignStatus:
            client = await connect_or_fail(address)
            # Refused, or no such campaign: exit 2 naming id (handle_errors)
            return await control_campaign(client, cid, action, reason)  # type: ignore[arg-type]

        st = asyncio.run(go())
        emit(st.model_dump(mode="json"), as_json, _print_status)

    command.__doc__ = f"{action.capitalize()} a running campaign."
    return click.command(action)(command)


for _action in ("pause", "resume", "abort"):
    campaign.add_command(_control(_action))
campaign.add_command(campaign_approve)

COMMANDS = [campaign]
