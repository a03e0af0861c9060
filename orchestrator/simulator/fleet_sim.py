"""Fleet-wide simulation: one campaign on every cluster of a preset, per-cluster results and totals.

Each cluster has its own train, budget and virtual clock, as in the live fleet (one
``ClusterTrain`` per cluster), so clusters simulate independently: the runs go to a pool of
worker processes (at most the machine's cores), each building its cluster from one topology of
the preset it keeps for its later clusters. Totals add hosts, work, interruptions, lost GPU-hours
and violations over clusters; the fleet's makespan is its slowest cluster's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import Preset
from orchestrator.fleet.topology import Topology
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.engine import simulate
from orchestrator.simulator.policies import NONE
from orchestrator.simulator.result import SimResult
from orchestrator.simulator.yardstick import baseline_config, judged

#: Keys summed over clusters in the fleet totals.
SUMMED = (
    "hosts_total",
    "hosts_visited",
    "hosts_quarantined",
    "hosts_in_repair",
    "budget_hosts",
    "max_unavailable_hosts",
    "maintenance_work_host_hours",
    "piggybacked_hosts",
    "released_hosts",
    "job_interruptions",
    "lost_gpu_hours",
    "lost_work_gpu_hours",
    "budget_violations",
    "domains",
)


_TOPOLOGIES: dict[str, Topology] = {}


def _topology(preset: Preset) -> Topology:
    """The preset's topology, built once per worker process (its later clusters reuse it)."""
    if preset.name not in _TOPOLOGIES:
        _TOPOLOGIES[preset.name] = Topology(preset)
    return _TOPOLOGIES[preset.name]


def _run_one(task: tuple[SimConfig, bool]) -> SimResult:
    """One run on one cluster (a pool worker's task): ``cfg``'s own, or (``baseline``) the
    ``none`` baseline of its fixed horizon, on a fresh cluster of the same preset and seed."""
    cfg, baseline = task
    sim = build_cluster(cfg.preset, cfg.seed, cfg.cluster, _topology(cfg.preset))
    return simulate(baseline_config(cfg) if baseline else cfg, sim)


def simulate_fleet(cfg: SimConfig, workers: int | None = None) -> dict[str, Any]:
    """Every cluster of ``cfg.preset`` under ``cfg`` (its ``cluster`` is ignored): the JSON object
    ``simulate`` prints for a fleet, ``{"clusters": [...], "totals": {...}}``."""
    start = time.perf_counter()
    (results,), used = run_fleets([cfg], workers)
    return fleet_json(cfg, results, time.perf_counter() - start, used)


def run_fleets(
    cfgs: Sequence[SimConfig], workers: int | None = None
) -> tuple[list[list[SimResult]], int]:
    """Every cluster of each config's preset (each config's ``cluster`` is ignored): per config,
    its clusters' results in the preset's order, and the worker processes used. All runs of all
    configs share one pool, so a sweep keeps every core busy across its settings."""
    configs = [
        dataclasses.replace(cfg, cluster=c) for cfg in cfgs for c in cfg.preset.cluster_names()
    ]
    workers = max(1, min(workers or os.cpu_count() or 1, len(configs)))
    flat = run_judged(configs, workers)
    out, i = [], 0
    for cfg in cfgs:
        n = cfg.preset.clusters
        out.append(flat[i : i + n])
        i += n
    return out, workers


def run_judged(configs: Sequence[SimConfig], workers: int) -> list[SimResult]:
    """Each config's run, in order, on ``workers`` processes; a fixed horizon's run judged
    against its ``none`` baseline. The baselines run as tasks of their own after every policy
    run: the pool's workers take the long runs first and even out on the short ones, instead of
    one worker running the last config's pair alone."""
    judging = [c.horizon_hours is not None and c.policy != NONE for c in configs]
    tasks = [(c, False) for c in configs]
    tasks += [(c, True) for c, j in zip(configs, judging, strict=True) if j]
    if workers <= 1:
        done = [_run_one(t) for t in tasks]
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            done = list(pool.map(_run_one, tasks))
    baselines = iter(done[len(configs) :])
    return [
        res if c.horizon_hours is None else judged(res, next(baselines) if j else res)
        for c, j, res in zip(configs, judging, done, strict=False)
    ]


def fleet_json(
    cfg: SimConfig, results: list[SimResult], wall: float, workers: int
) -> dict[str, Any]:
    """The JSON object of one fleet-wide run: per-cluster rows (no series) and totals."""
    rows = [r.to_json() for r in results]
    for row in rows:
        row.pop("series", None)
    return {
        "preset": cfg.preset.name,
        "policy": cfg.policy,
        "seed": cfg.seed,
        "days": cfg.days,
        "clusters": rows,
        "totals": fleet_totals(results, wall, workers),
    }


def fleet_series(results: Sequence[SimResult]) -> list[tuple[float, int, int]]:
    """The clusters' ``series`` summed into the fleet's: at each instant any cluster changes,
    hosts out of service and in maintenance over every cluster (each cluster holds its last
    value between its own points, and counts 0 before its first)."""
    # Stable on (t, cluster): a cluster's points at one instant keep their order (last wins).
    events = sorted(
        ((t, i, out, maint) for i, r in enumerate(results) for t, out, maint in r.series or []),
        key=lambda e: (e[0], e[1]),
    )
    now_out = [0] * len(results)
    now_maint = [0] * len(results)
    merged: list[tuple[float, int, int]] = []
    for t, i, out, maint in events:
        now_out[i], now_maint[i] = out, maint
        point = (t, sum(now_out), sum(now_maint))
        if merged and merged[-1][0] == t:
            merged[-1] = point
        else:
            merged.append(point)
    return merged


def fleet_totals(results: list[SimResult], wall: float, workers: int) -> dict[str, Any]:
    """Sums over clusters; the fleet's makespan is its slowest cluster's (None if any did not
    finish), its lower bound the largest of the clusters'."""
    rows = [r.to_json() for r in results]
    out: dict[str, Any] = {"clusters": len(results)}
    for key in SUMMED:
        total = sum(float(row.get(key) or 0) for row in rows)
        out[key] = round(total, 3) if isinstance(rows[0].get(key), float) else int(total)
    spans = [r.makespan_hours for r in results]
    out["complete"] = all(r.complete for r in results)
    out["makespan_hours"] = (
        round(max(s for s in spans if s is not None), 3)
        if all(s is not None for s in spans)
        else None
    )
    out["lower_bound_hours"] = round(max(r.lower_bound_hours for r in results), 3)
    span = out["makespan_hours"]
    out["makespan_over_lower_bound"] = (
        round(span / out["lower_bound_hours"], 4) if span and out["lower_bound_hours"] else None
    )
    # Host-weighted over each cluster's own run (clusters are alike in size here).
    hosts = sum(r.hosts_total for r in results)
    out["utilisation"] = round(sum(r.utilisation * r.hosts_total for r in results) / hosts, 4)
    out["wall_seconds"] = round(wall, 3)
    out["cluster_wall_seconds"] = round(sum(r.wall_seconds for r in results), 3)
    out["workers"] = workers
    reports = [r.horizon_report for r in results]
    if all(rep is not None for rep in reports):  # a fixed horizon: its figures summed too
        for key in HORIZON_SUMMED:
            out[key] = round(sum(float(rep.get(key) or 0) for rep in reports if rep), 1)
        parts = [rep["cost_parts"] for rep in reports if rep and "cost_parts" in rep]
        if len(parts) == len(reports):  # judged against the baseline: its parts summed too
            out["cost_parts"] = {k: round(sum(p[k] for p in parts), 1) for k in parts[0]}
    return out


#: A fixed horizon's keys summed over clusters in the fleet totals.
HORIZON_SUMMED = (
    "goodput_gpu_hours",
    "maintenance_cost_gpu_hours",
    "maintenance_work_gpu_hours",
    "cycles_completed",
)
