"""What-if sweeps: the same campaign under several settings, as a table and a PNG an SRE can read.

``--sweep domain-size=1,2,4,8`` runs one campaign per value on the same fleet, seed and job
trace, so the settings differ only in what is swept. Runs are independent, so they go to a small
process pool (one per core, at most two here). On a preset of several clusters (and no
``--cluster``) every setting runs on every cluster, as a plain run does (``fleet_sim.run_fleets``),
and reports per-cluster figures and fleet totals. The plot has two panels: hosts out of service
over time per setting (summed over the clusters), and job interruptions against makespan, one
labelled point per setting.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.contracts.models import parse_duration_hours
from orchestrator.simulator.budget import sim_budget
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.fleet_sim import fleet_series, run_judged
from orchestrator.simulator.policies import get_policy
from orchestrator.simulator.result import SimResult

SWEEP_KEYS = ("domain-size", "budget", "max-wait", "policy")


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """``key=v1,v2,...`` → (key, values); ValueError naming ``sweep`` on bad input."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or key not in SWEEP_KEYS:
        raise ValueError(f"sweep: expected KEY=V1,V2,... with KEY one of {', '.join(SWEEP_KEYS)}")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not vals:
        raise ValueError(f"sweep: no values given for {key}")
    return key, vals


def sweep_configs(base: SimConfig, key: str, values: Sequence[str]) -> list[SimConfig]:
    """One config per value; each value is validated like the matching option."""
    out = []
    for v in values:
        if key == "domain-size":
            try:
                n = int(v)
            except ValueError:
                raise ValueError(f"domain_size: {v!r} is not a whole number of hosts") from None
            if n < 1:
                raise ValueError("domain_size: must be at least one host")
            cfg = dataclasses.replace(base, domain_size=n)
        elif key == "budget":
            # The swept value is the maintenance budget; the floor stays 2 points above it.
            hosts = base.preset.hosts_per_cluster
            cfg = dataclasses.replace(base, budget=sim_budget(v, None, hosts))
        elif key == "max-wait":
            cfg = dataclasses.replace(base, max_wait_hours=parse_duration_hours(v, "max_wait"))
        else:
            get_policy(v)
            cfg = dataclasses.replace(base, policy=v)
        out.append(dataclasses.replace(cfg, series=True))
    return out


def run_sweep(configs: Sequence[SimConfig], workers: int | None = None) -> list[SimResult]:
    """Run every config (a fixed horizon's judged against its ``none`` baseline); in parallel
    processes when there is more than one core and run."""
    return run_judged(configs, workers or min(2, os.cpu_count() or 1, len(configs)))


def ranked(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The settings of a fixed horizon's sweep from least to most maintenance cost (the maintenance
    cost against the ``none`` baseline, restarts included; a fleet's from its totals)."""

    def lost(row: dict[str, Any]) -> float:
        return float((row.get("totals") or row)["maintenance_cost_gpu_hours"])

    return [str(row["setting"]) for row in sorted(rows, key=lost)]


def domain_notes(
    key: str, values: Sequence[str], results: Sequence[Sequence[SimResult]]
) -> list[str]:
    """One line per maintenance budget that caps the domain of some settings (``results``: per
    setting, its clusters' runs): the settings, the budget and the domain it runs instead.
    Domain sizes capped to the same size run the same campaign, and the line says so, so that
    identical rows never pass for a finding."""
    groups: dict[tuple[int, int], tuple[list[str], list[int]]] = {}
    for v, runs in zip(values, results, strict=True):
        for r in runs:
            if r.domain_size_note() is None:
                continue
            settings, asked = groups.setdefault((r.budget_hosts, r.effective_domain_size), ([], []))
            if v not in settings:
                settings.append(v)
            if r.domain_size not in asked:
                asked.append(r.domain_size)
    out = []
    for (budget, eff), (settings, asked) in groups.items():
        line = f"{key}={','.join(settings)}: the {budget}-host maintenance budget"
        line += " (per cluster)" if any(len(runs) > 1 for runs in results) else ""
        line += f" caps the domain at {_hosts(eff)}"
        if key != "domain-size":
            line += f" (domain_size {', '.join(map(str, asked))} asked)"
        line += f": any domain_size of {eff} or more runs the same campaign"
        out.append(line)
    return out


def _hosts(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


@dataclass(frozen=True)
class PlotRun:
    """One setting of a sweep as the plot draws it: one cluster's run, or a fleet's summed."""

    label: str
    series: list[tuple[float, int, int]]
    end_hours: float
    budget_hosts: int
    floor_hosts: int
    makespan_hours: float | None
    job_interruptions: int
    complete: bool

    @classmethod
    def of(cls, label: str, results: Sequence[SimResult]) -> PlotRun:
        """One run, or every cluster of a fleet (hosts and budgets summed, the slowest
        cluster's makespan, as the fleet totals count them)."""
        spans = [r.makespan_hours for r in results]
        return cls(
            label=label,
            series=(results[0].series or []) if len(results) == 1 else fleet_series(results),
            end_hours=max(r.simulated_hours for r in results),
            budget_hosts=sum(r.budget_hosts for r in results),
            floor_hosts=sum(r.max_unavailable_hosts for r in results),
            makespan_hours=None if None in spans else max(s for s in spans if s is not None),
            job_interruptions=sum(r.job_interruptions for r in results),
            complete=all(r.complete for r in results),
        )


def sweep_title(base: SimConfig, key: str, values: Sequence[str], scope: str) -> str:
    """The plot's title: what was swept over what, naming the policy only when it was fixed."""
    if key == "policy":
        return f"policies {', '.join(values)} on {scope}: sweep of policy"
    return f"{base.policy} on {scope}: sweep of {key}"


#: Line styles cycled over the settings, so lines drawn on top of each other still show.
_STYLES = ("-", "--", ":", "-.")


def plot(
    results: Sequence[SimResult | PlotRun],
    labels: Sequence[str],
    path: Path,
    title: str,
) -> None:
    """Write the two-panel PNG (matplotlib's Agg backend: no display needed).

    Each setting's capacity line has its own colour, dash style and width (drawn widest first),
    and a setting whose line is the same as an earlier one's says so in the legend; each
    distinct budget is a labelled horizontal line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [
        r if isinstance(r, PlotRun) else PlotRun.of(lb, [r])
        for r, lb in zip(results, labels, strict=True)
    ]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 6.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    _capacity_panel(ax1, runs, labels, colours)
    _interruptions_panel(ax2, runs, labels, colours)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _capacity_panel(
    ax: Any, runs: list[PlotRun], labels: Sequence[str], colours: list[str]
) -> None:
    """Hosts out of service over fleet time, one step line per setting, and the limits."""
    seen: dict[tuple[tuple[float, int], ...], str] = {}
    n = len(runs)
    for i, (run, label) in enumerate(zip(runs, labels, strict=True)):
        pts = run.series
        if not pts:
            continue
        ts = [p[0] for p in pts] + [run.end_hours]
        ys = [p[1] for p in pts] + [pts[-1][1]]
        shape = tuple(zip(ts, ys, strict=True))
        same = seen.setdefault(shape, label)
        legend = label if same == label else f"{label} (same as {same})"
        ax.step(
            ts,
            ys,
            where="post",
            label=legend,
            color=colours[i % len(colours)],
            linestyle=_STYLES[i % len(_STYLES)],
            linewidth=1.0 + 1.5 * (n - 1 - i) / max(1, n - 1),
            alpha=0.85,
            zorder=2 + i,
        )
    _limit_lines(ax, runs, labels, colours)
    ax.set_xlabel("fleet hours")
    ax.set_ylabel("hosts out of service")
    ax.set_title("Capacity out of service (dotted: maintenance budget, dashed: floor)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)


def _limit_lines(ax: Any, runs: list[PlotRun], labels: Sequence[str], colours: list[str]) -> None:
    """The limits go on top, thin and dotted, so a setting's line sitting on one still shows."""
    n = len(runs)
    for limit, name, colour, style in (
        ("budget_hosts", "maintenance budget", "crimson", (0, (1, 2))),
        ("floor_hosts", "floor (max_unavailable)", "dimgray", (0, (5, 3))),
    ):
        values = sorted({getattr(run, limit) for run in runs})
        for b in values:
            idx = [i for i, run in enumerate(runs) if getattr(run, limit) == b]
            which = "" if len(values) == 1 else f" ({', '.join(labels[i] for i in idx)})"
            ax.axhline(
                b,
                # One limit: its own colour; one per setting: the setting's colour.
                color=colour if len(values) == 1 else colours[idx[0] % len(colours)],
                linestyle=style,
                linewidth=1.3,
                zorder=3 + n,
                label=f"{name}: {b} hosts{which}",
            )


def _interruptions_panel(
    ax: Any, runs: list[PlotRun], labels: Sequence[str], colours: list[str]
) -> None:
    """Each setting's job interruptions against its makespan."""
    for i, (run, label) in enumerate(zip(runs, labels, strict=True)):
        x = run.makespan_hours if run.makespan_hours is not None else run.end_hours
        ax.scatter([x], [run.job_interruptions], s=40, color=colours[i % len(colours)])
        suffix = "" if run.complete else " (incomplete)"
        ax.annotate(
            label + suffix,
            (x, run.job_interruptions),
            fontsize=8,
            xytext=(4, 4 + 10 * (i % 3)),
            textcoords="offset points",
        )
    ax.set_xlabel("makespan (fleet hours)")
    ax.set_ylabel("job interruptions")
    ax.set_title("Interruptions versus makespan")
    ax.grid(alpha=0.3)
