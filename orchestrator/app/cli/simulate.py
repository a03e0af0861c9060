"""``trainctl simulate``: a maintenance campaign in virtual time, and what-if sweeps.

No Temporal and no SQLite: the fleet model and the train's planning functions run under the
discrete-event engine of ``orchestrator.simulator``. Bad input exits 2 naming the field.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import pydantic
from rich.console import Console
from rich.table import Table

from orchestrator.app.cli.common import (
    BadInput,
    describe_validation_error,
    emit,
    handle_errors,
    json_option,
)
from orchestrator.contracts.models import CapacityBudget, parse_duration_hours
from orchestrator.fleet.presets import PRESETS, get_preset
from orchestrator.fleet.settings import MAX_SEED
from orchestrator.simulator.budget import sim_budget
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.engine import simulate as run_simulation
from orchestrator.simulator.fleet_sim import fleet_json, run_fleets, simulate_fleet
from orchestrator.simulator.policies import SIM_POLICIES, get_policy
from orchestrator.simulator.sweep import (
    SWEEP_KEYS,
    PlotRun,
    domain_notes,
    parse_sweep,
    plot,
    run_sweep,
    sweep_configs,
    sweep_title,
)
from orchestrator.simulator.yardstick import simulate_judged

#: Runs in one sweep: each is a whole simulated campaign (seconds to minutes of CPU).
MAX_SWEEP_VALUES = 16
#: The largest domain, as a train spec allows.
MAX_DOMAIN_SIZE = 10_000
#: Columns a console not on a terminal (a pipe, a file) renders: every table whole, none cut
#: to rich's default of 80.
PIPE_WIDTH = 1_000

_COLUMNS = (
    ("value", "setting"),
    ("domain", "effective_domain_size"),
    ("visited", "hosts_visited"),
    ("quar.", "hosts_quarantined"),
    ("span h", "makespan_hours"),
    ("/bound", "makespan_over_lower_bound"),
    ("/after out.", "makespan_over_lower_bound_after_outages"),
    ("interr.", "job_interruptions"),
    ("lost GPU-h", "lost_gpu_hours"),
    ("viol.", "budget_violations"),
    ("util.", "utilisation"),
    ("wall s", "wall_seconds"),
)


def _console() -> Console:
    """A console for the command's output: the terminal's width on a terminal, and wide enough
    for every table when piped (rich would otherwise cut them to 80 columns)."""
    con = Console()
    return con if con.is_terminal else Console(width=PIPE_WIDTH)


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    """Each distinct ``domain_size_note`` of the rows, in order."""
    return list(
        dict.fromkeys(str(r["domain_size_note"]) for r in rows if r.get("domain_size_note"))
    )


def _print_run(o: dict[str, Any]) -> None:
    con = _console()
    done = "complete" if o["complete"] else "NOT complete"
    con.print(
        f"[bold]{o['policy']}[/] on {o['preset']}/{o['cluster']}: domain {o['domain_size']}"
        f"{_capped(o)}, "
        f"budget {o['budget_hosts']} hosts, seed {o['seed']}: cycle {done}"
    )
    t = Table("metric", "value")
    for key in (
        "hosts_total",
        "hosts_visited",
        "hosts_quarantined",
        "hosts_in_repair",
        "makespan_hours",
        "lower_bound_hours",
        "makespan_over_lower_bound",
        "lower_bound_after_outages_hours",
        "makespan_over_lower_bound_after_outages",
        "job_interruptions",
        "lost_gpu_hours",
        "lost_work_gpu_hours",
        "idle_held_gpu_hours",
        "drain_wait_host_hours",
        "outage_budget_hosts_mean",
        "budget_violations",
        "max_out_of_service",
        "piggybacked_hosts",
        "released_hosts",
        "utilisation",
        "wall_seconds",
    ):
        t.add_row(key, str(o.get(key)))
    for key in ("cycle_target_hours", "cycle_target_met", "behind_target_plans"):
        if key in o:  # only with --cycle-target
            t.add_row(key, str(o[key]))
    for key in HORIZON_ROWS:
        if key in o:  # only with --horizon
            t.add_row(key, str(o[key]))
    if "baseline" in o:
        t.add_row("baseline (none) utilisation", str(o["baseline"]["utilisation"]))
    con.print(t)
    for c in o.get("cycles") or []:
        span = c["makespan_hours"]
        took = "running" if span is None else f"{span:.1f} h"
        con.print(f"cycle {c['cycle']}: {took}, {c['hosts_visited']} hosts visited")
    if o.get("max_out_of_service_note"):
        con.print(f"max_out_of_service: {o['max_out_of_service_note']}")
    for note in _notes([o]):
        con.print(f"domain_size: {note}")


#: A fixed horizon's rows in the text output (``--horizon``).
HORIZON_ROWS = (
    "horizon_hours",
    "goodput_gpu_hours",
    "maintenance_cost_gpu_hours",
    "cost_parts",
    "maintenance_work_gpu_hours",
    "cost_over_work",
    "hidden_in_idle_share",
    "cycles_completed",
    "cycles_meeting_target",
    "visit_interval_hours",
    "ettr",
    "pinned_job",
)


def _capped(o: dict[str, Any]) -> str:
    """`` (capped at N by the budget)`` when the budget runs a smaller domain than asked."""
    eff = o.get("effective_domain_size")
    if eff is None or eff == o.get("domain_size"):
        return ""
    return f" (capped at {eff} by the budget)"


def _print_fleet(o: dict[str, Any]) -> None:
    con = _console()
    title = f"{o['policy']} on every cluster of {o['preset']}"
    t = Table("cluster", *(c[0] for c in _COLUMNS[1:]), title=title)
    for row in [*o["clusters"], _fleet_row(o)]:
        t.add_row(str(row.get("cluster")), *(_cell(k, row.get(k)) for _, k in _COLUMNS[1:]))
    con.print(t)
    for note in _notes(o["clusters"]):
        con.print(f"domain_size: {note}")


def _fleet_row(o: dict[str, Any]) -> dict[str, Any]:
    """The totals as the table's ``fleet`` row; its domain is the clusters' when they agree."""
    domains = {row.get("effective_domain_size") for row in o["clusters"]}
    domain = domains.pop() if len(domains) == 1 else "-"
    return {**o["totals"], "cluster": "fleet", "effective_domain_size": domain}


def _cell(key: str, v: object) -> str:
    if not isinstance(v, float):
        return str(v)
    if key == "utilisation":
        return f"{v:.1%}"
    return f"{v:.2f}" if key.startswith("makespan_over") else f"{v:,.1f}"


def _print_sweep(o: dict[str, Any]) -> None:
    con = _console()
    title = f"sweep of {o['sweep']} on {o['scope']}"
    if o.get("clusters"):  # every cluster of a fleet: its rows, then the fleet's totals
        t = Table(_COLUMNS[0][0], "cluster", *(c[0] for c in _COLUMNS[1:]), title=title)
        for run in o["runs"]:
            for row in [*run["clusters"], _fleet_row(run)]:
                cells = (_cell(k, row.get(k)) for _, k in _COLUMNS[1:])
                t.add_row(run["setting"], str(row.get("cluster")), *cells)
            t.add_section()
    else:
        t = Table(*(c[0] for c in _COLUMNS), title=title)
        for row in o["runs"]:
            t.add_row(*(_cell(k, row.get(k)) for _, k in _COLUMNS))
    con.print(t)
    for note in o.get("notes") or []:
        con.print(f"domain_size: {note}")
    if o.get("plot"):
        con.print(f"plot written to {o['plot']}")


@click.command("simulate")
@click.option("--preset", required=True, help=f"Fleet shape: {', '.join(PRESETS)}.")
@click.option(
    "--policy",
    default="job-aware",
    show_default=True,
    help=f"Drain policy: {', '.join(SIM_POLICIES)} (none: no train, the baseline).",
)
@click.option("--domain-size", type=str, default=None, help="Hosts in flight (default: budget).")
@click.option(
    "--budget",
    default="3%",
    show_default=True,
    help="Maintenance budget: most hosts out for planned work (count or %).",
)
@click.option(
    "--max-unavailable",
    default=None,
    help="Availability floor: most hosts out for any reason (default: the budget + 2 points).",
)
@click.option(
    "--halt-after-failures",
    type=click.IntRange(1, 1_000_000),
    default=None,
    help="Halt the cycle on this many hosts failing in a row (a train spec's "
    "halt_after_failures). Default: only a bad build halts it (failures more than the fleet's "
    "base rate explains, planning.failure_gate), as behind a campaign's train.",
)
@click.option("--days", type=str, default="30", show_default=True, help="Fleet days to run.")
@click.option(
    "--seed",
    type=click.IntRange(0, MAX_SEED),
    default=1,
    show_default=True,
    help="Fleet and trace seed.",
)
@click.option("--max-wait", default="4h", show_default=True, help="Drain deadline per host.")
@click.option(
    "--cycle-target",
    default=None,
    help="Visit-cycle target, as a train spec's cycle_target (e.g. 3d): while the cycle is "
    "projected past it the train evicts sooner, trading interruptions for pace. Default: none.",
)
@click.option(
    "--cluster",
    default=None,
    help="One cluster of a multi-cluster preset (default: every cluster, with fleet totals).",
)
@click.option(
    "--horizon",
    default=None,
    help="Run this long whatever happens (e.g. 30d): the train cycles, every cycle is "
    "reported, and the run is judged against the no-maintenance baseline of the same seed "
    "(goodput, maintenance cost and its parts, ETTR). Default: stop at the cycle's end.",
)
@click.option(
    "--target-every",
    default=None,
    help="With --horizon: a new version of each targeted component this often (e.g. 7d).",
)
@click.option(
    "--cycle-every",
    default=None,
    help="With --horizon, an experiment (no train spec field yet): a cycle starts no sooner "
    "than this after the previous one started (e.g. 66h). Default: at once, as a live train.",
)
@click.option(
    "--restart-base",
    default="5m",
    show_default=True,
    help="With --horizon: restart time of every interrupted job, paid by all its GPUs.",
)
@click.option(
    "--restart-per-host",
    default="0.01m",
    show_default=True,
    help="With --horizon: restart time added per host of the job.",
)
@click.option(
    "--pin-job",
    default=None,
    help="With --horizon (or alone: horizon = its days): hosts=N,days=D, a job at the queue's "
    "head from the start that runs the whole horizon (the Llama 3 calibration).",
)
@click.option("--series", is_flag=True, help="Include hosts out of service over time.")
@click.option("--sweep", default=None, help=f"KEY=V1,V2,... with KEY in {', '.join(SWEEP_KEYS)}.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Write a PNG (capacity over time; interruptions vs makespan).",
)
@json_option
@handle_errors
def simulate(
    preset: str,
    policy: str,
    domain_size: str | None,
    budget: str,
    max_unavailable: str | None,
    halt_after_failures: int | None,
    days: str,
    seed: int,
    max_wait: str,
    cycle_target: str | None,
    cluster: str | None,
    horizon: str | None,
    target_every: str | None,
    cycle_every: str | None,
    restart_base: str,
    restart_per_host: str,
    pin_job: str | None,
    series: bool,
    sweep: str | None,
    plot_path: Path | None,
    as_json: bool,
) -> None:
    """Run a maintenance campaign on a simulated cluster in virtual time (no Temporal)."""
    if plot_path is not None:
        _check_plot_path(plot_path)  # before the run: a long run must not end on a bad path
    want_series = series or plot_path is not None
    cfg = _config(preset, policy, domain_size, budget, days, seed, max_wait, want_series)
    cfg.budget = _budget(budget, max_unavailable, cfg.preset.hosts_per_cluster)
    cfg.halt_after_failures = halt_after_failures
    cfg.cycle_target_hours = _cycle_target(cycle_target)
    _horizon(cfg, horizon, target_every, restart_base, restart_per_host, pin_job)
    if cycle_every is not None:
        if cfg.horizon_hours is None:
            raise BadInput("cycle_every: needs --horizon", field="cycle_every")
        cfg.cycle_every_hours = _hours(cycle_every, "cycle_every")
    if cfg.horizon_hours is not None and sweep is not None:
        raise BadInput("sweep: --sweep does not take --horizon (run each setting)", field="sweep")
    if cluster is not None:
        if cluster not in cfg.preset.cluster_names():
            raise BadInput(f"cluster: unknown cluster {cluster!r} in preset {cfg.preset.name}")
        cfg.cluster = cluster
    elif sweep is None and cfg.preset.clusters > 1:
        if plot_path is not None or series:
            raise BadInput("cluster: --plot and --series need one cluster (--cluster c00)")
        emit(simulate_fleet(cfg), as_json, _print_fleet)
        return
    if sweep is None:
        res = run_simulation(cfg) if cfg.horizon_hours is None else simulate_judged(cfg)
        if plot_path is not None:
            plot([res], [cfg.policy], plot_path, f"{cfg.policy} on {cfg.preset.name}")
        out = res.to_json()
        if not series:
            out.pop("series", None)
        if plot_path is not None:
            out["plot"] = str(plot_path)
        emit(out, as_json, _print_run)
        return
    key, values = parse_sweep(sweep)
    if len(values) > MAX_SWEEP_VALUES:
        raise BadInput(f"sweep: at most {MAX_SWEEP_VALUES} values (got {len(values)})")
    try:
        configs = sweep_configs(cfg, key, values)
    except pydantic.ValidationError as err:  # a swept budget, read as --budget is
        raise BadInput(f"budget: {describe_validation_error(err)}", field="budget") from None
    for c in configs:
        _check_domain_size(c.domain_size)
    labels = [f"{key}={v}" for v in values]
    if cfg.cluster is None and cfg.preset.clusters > 1:
        if series:
            raise BadInput("cluster: --series needs one cluster (--cluster c00)")
        emit(_fleet_sweep(cfg, key, values, configs, labels, plot_path), as_json, _print_sweep)
        return
    scope = f"{cfg.preset.name}/{cfg.cluster or cfg.preset.cluster_names()[0]}"
    results = run_sweep(configs)
    if plot_path is not None:
        plot(results, labels, plot_path, sweep_title(cfg, key, values, scope))
    runs = []
    for label, res in zip(labels, results, strict=True):
        row = res.to_json()
        if not series:
            row.pop("series", None)
        runs.append({"setting": label.partition("=")[2], **row})
    emit(
        {
            "sweep": key,
            "values": values,
            "runs": runs,
            "plot": str(plot_path or "") or None,
            "scope": scope,
            "notes": domain_notes(key, values, [[r] for r in results]),
        },
        as_json,
        _print_sweep,
    )


def _fleet_sweep(
    cfg: SimConfig,
    key: str,
    values: list[str],
    configs: list[SimConfig],
    labels: list[str],
    plot_path: Path | None,
) -> dict[str, Any]:
    """A sweep over every cluster of the preset: per setting, the object a plain fleet-wide run
    prints (per-cluster rows and totals), all runs sharing one pool of worker processes."""
    start = time.perf_counter()
    fleets, workers = run_fleets(configs)
    wall = time.perf_counter() - start
    scope = f"every cluster of {cfg.preset.name}"
    if plot_path is not None:
        runs = [PlotRun.of(lb, rs) for lb, rs in zip(labels, fleets, strict=True)]
        plot(runs, labels, plot_path, sweep_title(cfg, key, values, scope))
    out = []
    for v, c, results in zip(values, configs, fleets, strict=True):
        # Each setting's wall time is its clusters' own (the runs of all settings overlap).
        fleet = fleet_json(c, results, sum(r.wall_seconds for r in results), workers)
        out.append({"setting": v, **fleet})
    return {
        "sweep": key,
        "values": values,
        "runs": out,
        "plot": str(plot_path or "") or None,
        "scope": scope,
        "notes": domain_notes(key, values, fleets),
        "clusters": cfg.preset.cluster_names(),
        "wall_seconds": round(wall, 3),
    }


def _check_plot_path(path: Path) -> None:
    """BadInput naming ``plot`` unless a PNG can be written at ``path`` (tried, then undone)."""
    if path.is_dir():
        raise BadInput(f"plot: {path} is a directory; name a .png file", field="plot")
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as err:
        raise BadInput(f"plot: cannot write {path}: {err.strerror or err}", field="plot") from None
    if not existed:
        path.unlink(missing_ok=True)


def _budget(budget: str, max_unavailable: str | None, hosts: int) -> CapacityBudget:
    try:
        return sim_budget(budget, max_unavailable, hosts)
    except pydantic.ValidationError as err:
        field = "max_unavailable" if max_unavailable is not None else "budget"
        raise BadInput(f"{field}: {describe_validation_error(err)}") from None
    except ValueError as err:
        raise BadInput(str(err)) from None


def _hours(value: str, field: str, zero_ok: bool = False) -> float:
    try:
        hours = parse_duration_hours(value, field)
    except ValueError as err:
        raise BadInput(str(err), field=field) from None
    if hours < 0 or (hours == 0 and not zero_ok):
        raise BadInput(f"{field}: must be above 0 (got {value!r})", field=field)
    return hours


def _pin(value: str) -> tuple[int, float]:
    """``--pin-job hosts=N,days=D``."""
    parts = dict(p.partition("=")[::2] for p in value.split(","))
    if set(parts) != {"hosts", "days"}:
        raise BadInput("pin_job: give hosts=N,days=D (e.g. hosts=2048,days=54)", field="pin_job")
    try:
        hosts, days = int(parts["hosts"]), float(parts["days"])
    except ValueError:
        raise BadInput(f"pin_job: {value!r} is not hosts=N,days=D", field="pin_job") from None
    if hosts < 1 or not 0 < days <= 366:
        raise BadInput("pin_job: hosts at least 1, days above 0 and at most 366", field="pin_job")
    return hosts, days


def _horizon(
    cfg: SimConfig,
    horizon: str | None,
    target_every: str | None,
    restart_base: str,
    restart_per_host: str,
    pin_job: str | None,
) -> None:
    """The fixed-horizon options into ``cfg`` (checked before anything runs)."""
    pin = _pin(pin_job) if pin_job is not None else None
    if horizon is None and pin is not None:
        horizon = f"{pin[1]}d"
    base = _hours(restart_base, "restart_base", zero_ok=True)
    per_host = _hours(restart_per_host, "restart_per_host", zero_ok=True)
    if horizon is None:
        if target_every is not None:
            raise BadInput("target_every: needs --horizon", field="target_every")
        return
    hours = _hours(horizon, "horizon")
    if hours > 366 * 24:
        raise BadInput("horizon: at most 366 days", field="horizon")
    if pin is not None and pin[0] > cfg.preset.hosts_per_cluster:
        raise BadInput(
            f"pin_job: {pin[0]} hosts, the cluster has {cfg.preset.hosts_per_cluster}",
            field="pin_job",
        )
    cfg.horizon_hours = hours
    cfg.target_every_hours = _hours(target_every, "target_every") if target_every else None
    cfg.restart_base_hours = base
    cfg.restart_per_host_hours = per_host
    cfg.pin_job = pin


def _cycle_target(value: str | None) -> float | None:
    """``--cycle-target`` in hours, as a train spec reads its ``cycle_target``."""
    if value is None:
        return None
    try:
        hours = parse_duration_hours(value, "cycle_target")
    except ValueError as err:
        raise BadInput(str(err)) from None
    if hours <= 0:
        raise BadInput("cycle_target: must be above 0 (e.g. 3d)")
    return hours


def _check_domain_size(size: int | None) -> None:
    if size is not None and not 1 <= size <= MAX_DOMAIN_SIZE:
        raise BadInput(f"domain_size: must be from 1 to {MAX_DOMAIN_SIZE:,} hosts")


def _config(
    preset: str,
    policy: str,
    domain_size: str | None,
    budget: str,
    days: str,
    seed: int,
    max_wait: str,
    series: bool,
) -> SimConfig:
    shape = get_preset(preset)
    get_policy(policy)
    size: int | None = None
    if domain_size is not None:
        try:
            size = int(domain_size)
        except ValueError:
            raise BadInput(f"domain_size: {domain_size!r} is not a whole number of hosts") from None
        _check_domain_size(size)
    try:
        n_days = float(days)
    except ValueError:
        raise BadInput(f"days: {days!r} is not a number") from None
    if not 0 < n_days <= 366:
        raise BadInput("days: must be above 0 and at most 366")
    try:
        cap = CapacityBudget(max_unavailable=budget)
    except pydantic.ValidationError as err:
        raise BadInput(f"budget: {describe_validation_error(err)}") from None
    wait = parse_duration_hours(max_wait, "max_wait")
    return SimConfig(
        preset=shape,
        policy=policy,
        budget=cap,
        domain_size=size,
        days=n_days,
        seed=seed,
        max_wait_hours=wait,
        series=series,
    )


COMMANDS = [simulate]
