"""What-if sweeps: the same campaign under several settings, as a table and a PNG an SRE can read.

``--sweep domain-size=1,2,4,8`` runs one campaign per value on the same fleet, seed and job
trace, so the settings differ only in what is swept. Runs are independent, so they go to a small
process pool (one per core, at most two here). The plot has two panels: hosts out of service over
time per setting, and job interruptions against makespan, one labelled point per setting.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from orchestrator.models import parse_duration_hours
from orchestrator.simulator.budget import sim_budget
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.engine import simulate
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
    """Run every config; in parallel processes when there is more than one core and run."""
    workers = workers or min(2, os.cpu_count() or 1, len(configs))
    if workers <= 1:
        return [simulate(c) for c in configs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(simulate, configs))


def plot(results: Sequence[SimResult], labels: Sequence[str], path: Path, title: str) -> None:
    """Write the two-panel PNG (matplotlib's Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for res, label in zip(results, labels, strict=True):
        pts = res.series or []
        if pts:
            ts = [p[0] for p in pts] + [res.simulated_hours]
            ys = [p[1] for p in pts] + [pts[-1][1]]
            ax1.step(ts, ys, where="post", label=label, linewidth=1.2)
    if results:
        ax1.axhline(results[0].budget_hosts, color="black", linestyle=":", linewidth=1)
    ax1.set_xlabel("fleet hours")
    ax1.set_ylabel("hosts out of service")
    ax1.set_title("Capacity out of service (dotted: budget)")
    ax1.legend(fontsize=8)
    for res, label in zip(results, labels, strict=True):
        x = res.makespan_hours if res.makespan_hours is not None else res.simulated_hours
        ax2.scatter([x], [res.job_interruptions], s=40)
        suffix = "" if res.complete else " (incomplete)"
        ax2.annotate(
            label + suffix,
            (x, res.job_interruptions),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax2.set_xlabel("makespan (fleet hours)")
    ax2.set_ylabel("job interruptions")
    ax2.set_title("Interruptions versus makespan")
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
