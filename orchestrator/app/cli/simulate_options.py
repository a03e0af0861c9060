"""Reading ``trainctl simulate``'s options into a ``SimConfig``: durations, budgets, pins, the
horizon; bad input raises ``BadInput`` naming the option's field (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import pydantic

from orchestrator.app.cli.common import BadInput, describe_validation_error
from orchestrator.contracts.models import CapacityBudget, parse_duration_hours
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator.budget import sim_budget
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.policies import get_policy

#: Runs in one sweep: each is a whole simulated campaign (seconds to minutes of CPU).
MAX_SWEEP_VALUES = 16
#: The largest domain, as a train spec allows.
MAX_DOMAIN_SIZE = 10_000


def plot_formats() -> list[str]:
    """The file formats the plot can be written in (matplotlib's Agg canvas, which ``plot``
    uses; ``pgf`` left out: it needs a LaTeX installation to write)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return sorted(set(FigureCanvasAgg.get_supported_filetypes()) - {"pgf"})


def check_plot_path(path: Path) -> None:
    """BadInput naming ``plot`` unless the plot can be written at ``path``: a format named by
    its extension (matplotlib would otherwise fail after the whole run, or add ``.png`` to a
    name without one), and a file that can be made there (tried, then undone)."""
    if path.is_dir():
        raise BadInput(f"plot: {path} is a directory; name a .png file", field="plot")
    formats = plot_formats()
    ext = path.suffix.lower().lstrip(".")
    if ext not in formats:
        why = (
            f".{ext} is not a format it can be written in"
            if ext
            else "no extension names its format"
        )
        raise BadInput(
            f"plot: {path}: {why}; name a file ending in one of .{', .'.join(formats)}",
            field="plot",
        )
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as err:
        raise BadInput(f"plot: cannot write {path}: {err.strerror or err}", field="plot") from None
    if not existed:
        path.unlink(missing_ok=True)


def capacity_budget(budget: str, max_unavailable: str | None, hosts: int) -> CapacityBudget:
    try:
        return sim_budget(budget, max_unavailable, hosts)
    except pydantic.ValidationError as err:
        field = "max_unavailable" if max_unavailable is not None else "budget"
        raise BadInput(f"{field}: {describe_validation_error(err)}") from None
    except ValueError as err:
        raise BadInput(str(err)) from None


def read_hours(value: str, field: str, zero_ok: bool = False) -> float:
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


def apply_horizon(
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
    base = read_hours(restart_base, "restart_base", zero_ok=True)
    per_host = read_hours(restart_per_host, "restart_per_host", zero_ok=True)
    if horizon is None:
        if target_every is not None:
            raise BadInput("target_every: needs --horizon", field="target_every")
        return
    hours = read_hours(horizon, "horizon")
    if hours > 366 * 24:
        raise BadInput("horizon: at most 366 days", field="horizon")
    if pin is not None and pin[0] > cfg.preset.hosts_per_cluster:
        raise BadInput(
            f"pin_job: {pin[0]} hosts, the cluster has {cfg.preset.hosts_per_cluster}",
            field="pin_job",
        )
    cfg.horizon_hours = hours
    cfg.target_every_hours = read_hours(target_every, "target_every") if target_every else None
    cfg.restart_base_hours = base
    cfg.restart_per_host_hours = per_host
    cfg.pin_job = pin


def read_cycle_target(value: str | None) -> float | None:
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


def check_domain_size(size: int | None) -> None:
    if size is not None and not 1 <= size <= MAX_DOMAIN_SIZE:
        raise BadInput(f"domain_size: must be from 1 to {MAX_DOMAIN_SIZE:,} hosts")


def sim_config(
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
        check_domain_size(size)
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
