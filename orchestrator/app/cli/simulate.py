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

from orchestrator.app.cli.common import (
    BadInput,
    describe_validation_error,
    emit,
    handle_errors,
    json_option,
)
from orchestrator.app.cli.simulate_options import (
    MAX_SWEEP_VALUES,
    apply_horizon,
    capacity_budget,
    check_domain_size,
    check_plot_path,
    read_cycle_target,
    read_hours,
    sim_config,
)
from orchestrator.app.cli.simulate_report import print_fleet, print_run, print_sweep
from orchestrator.fleet.presets import PRESETS
from orchestrator.fleet.settings import MAX_SEED
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.engine import simulate as run_simulation
from orchestrator.simulator.fleet_sim import fleet_json, run_fleets, simulate_fleet
from orchestrator.simulator.policies import SIM_POLICIES
from orchestrator.simulator.sweep import (
    SWEEP_KEYS,
    PlotRun,
    domain_notes,
    parse_sweep,
    plot,
    ranked,
    run_sweep,
    sweep_configs,
    sweep_title,
)
from orchestrator.simulator.yardstick import simulate_judged


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
    "projected past it the train evicts sooner, trading interruptions for pace; well ahead of "
    "it, it spares jobs, as a live train does. Default: none.",
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
    "--pace/--no-pace",
    default=True,
    show_default=True,
    help="With --cycle-target: the train spares jobs while well ahead of its target, as a "
    "live train does; --no-pace, an experiment, never spares them.",
)
@click.option(
    "--restart-base",
    default="1m",
    show_default=True,
    help="With --horizon: restart time of every interrupted job, paid by all its GPUs "
    "(the pinned model's; see the cost model in the docs).",
)
@click.option(
    "--restart-per-host",
    default="0m",
    show_default=True,
    help="With --horizon: restart time added per host of the job (0: the same for every size).",
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
    pace: bool,
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
        check_plot_path(plot_path)  # before the run: a long run must not end on a bad path
    want_series = series or plot_path is not None
    cfg = sim_config(preset, policy, domain_size, budget, days, seed, max_wait, want_series)
    cfg.budget = capacity_budget(budget, max_unavailable, cfg.preset.hosts_per_cluster)
    cfg.halt_after_failures = halt_after_failures
    cfg.cycle_target_hours = read_cycle_target(cycle_target)
    apply_horizon(cfg, horizon, target_every, restart_base, restart_per_host, pin_job)
    _apply_cycle_every(cfg, cycle_every)
    cfg.pace = pace
    if cluster is not None:
        _pick_cluster(cfg, cluster)
    elif sweep is None and cfg.preset.clusters > 1:
        if plot_path is not None or series:
            raise BadInput("cluster: --plot and --series need one cluster (--cluster c00)")
        emit(simulate_fleet(cfg), as_json, print_fleet)
        return
    if sweep is None:
        _run_one(cfg, series, plot_path, as_json)
    else:
        _run_sweep(cfg, sweep, series, plot_path, as_json)


def _apply_cycle_every(cfg: SimConfig, cycle_every: str | None) -> None:
    """``--cycle-every``: a new cycle this often, on a horizon run only."""
    if cycle_every is None:
        return
    if cfg.horizon_hours is None:
        raise BadInput("cycle_every: needs --horizon", field="cycle_every")
    cfg.cycle_every_hours = read_hours(cycle_every, "cycle_every")


def _pick_cluster(cfg: SimConfig, cluster: str) -> None:
    if cluster not in cfg.preset.cluster_names():
        raise BadInput(f"cluster: unknown cluster {cluster!r} in preset {cfg.preset.name}")
    cfg.cluster = cluster


def _run_one(cfg: SimConfig, series: bool, plot_path: Path | None, as_json: bool) -> None:
    """One run of one cluster: its report, with its series and plot if asked."""
    res = run_simulation(cfg) if cfg.horizon_hours is None else simulate_judged(cfg)
    if plot_path is not None:
        plot([res], [cfg.policy], plot_path, f"{cfg.policy} on {cfg.preset.name}")
    out = res.to_json()
    if not series:
        out.pop("series", None)
    if plot_path is not None:
        out["plot"] = str(plot_path)
    emit(out, as_json, print_run)


def _run_sweep(
    cfg: SimConfig, sweep: str, series: bool, plot_path: Path | None, as_json: bool
) -> None:
    """``--sweep key=v1,v2,...``: one run per value, of a cluster or of the whole fleet."""
    key, values = parse_sweep(sweep)
    if len(values) > MAX_SWEEP_VALUES:
        raise BadInput(f"sweep: at most {MAX_SWEEP_VALUES} values (got {len(values)})")
    try:
        configs = sweep_configs(cfg, key, values)
    except pydantic.ValidationError as err:  # a swept budget, read as --budget is
        raise BadInput(f"budget: {describe_validation_error(err)}", field="budget") from None
    for c in configs:
        check_domain_size(c.domain_size)
    labels = [f"{key}={v}" for v in values]
    if cfg.cluster is None and cfg.preset.clusters > 1:
        if series:
            raise BadInput("cluster: --series needs one cluster (--cluster c00)")
        emit(_fleet_sweep(cfg, key, values, configs, labels, plot_path), as_json, print_sweep)
        return
    emit(_cluster_sweep(cfg, key, values, configs, labels, series, plot_path), as_json, print_sweep)


def _cluster_sweep(
    cfg: SimConfig,
    key: str,
    values: list[str],
    configs: list[SimConfig],
    labels: list[str],
    series: bool,
    plot_path: Path | None,
) -> dict[str, Any]:
    """A sweep on one cluster: per setting, the object a plain run prints."""
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
    out = {
        "sweep": key,
        "values": values,
        "runs": runs,
        "plot": str(plot_path or "") or None,
        "scope": scope,
        "notes": domain_notes(key, values, [[r] for r in results]),
    }
    return _with_ranking(cfg, out)


def _with_ranking(cfg: SimConfig, out: dict[str, Any]) -> dict[str, Any]:
    """A fixed horizon's sweep with its settings ranked by the goodput maintenance cost the
    jobs (``maintenance_cost_gpu_hours``), least first."""
    if cfg.horizon_hours is not None:
        out["ranked_by"] = (
            "goodput lost to maintenance (maintenance_cost_gpu_hours: the sum of cost_parts, "
            "restarts included)"
        )
        out["ranking"] = ranked(out["runs"])
    return out


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
    return _with_ranking(
        cfg,
        {
            "sweep": key,
            "values": values,
            "runs": out,
            "plot": str(plot_path or "") or None,
            "scope": scope,
            "notes": domain_notes(key, values, fleets),
            "clusters": cfg.preset.cluster_names(),
            "wall_seconds": round(wall, 3),
        },
    )


COMMANDS = [simulate]
