"""Wall time of fleet-wide simulation: one cycle of meta-24k, the whole meta-600k fleet, and the
ratio of the fleet's wall time to 25 x one cluster's (measured in the same run).

Every cluster simulates independently (own train, budget and clock), in a pool of worker
processes, so the ratio is below 1 with more than one core, about 1 on one. CPU seconds are
printed beside wall seconds (the fleet's: its worker processes'), since on a shared machine the
wall time is mostly other people's load: fleet CPU / workers is the wall time on idle cores.
Outside CI: ``nice python benchmarks/bench_capacity.py`` (minutes on a 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig, simulate
from orchestrator.simulator.budget import sim_budget
from orchestrator.simulator.fleet_sim import simulate_fleet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", default="3%", help="maintenance budget (floor: + 2 points)")
    ap.add_argument("--policy", default="job-aware")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    one, fleet = get_preset("meta-24k"), get_preset("meta-600k")
    base = SimConfig(
        preset=one,
        policy=args.policy,
        seed=args.seed,
        budget=sim_budget(args.budget, None, one.hosts_per_cluster),
        halt_after_failures=1000,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    single = simulate(base)
    one_wall, one_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"meta-24k one cycle: {one_wall:.1f} s wall ({one_cpu:.1f} s CPU), "
        f"makespan {single.makespan_hours} h "
        f"({single.makespan_ratio and round(single.makespan_ratio, 3)} x bound), "
        f"{single.hosts_visited + single.hosts_quarantined}/{single.hosts_total} hosts"
    )
    cfg = SimConfig(
        preset=fleet,
        policy=args.policy,
        seed=args.seed,
        budget=sim_budget(args.budget, None, fleet.hosts_per_cluster),
        halt_after_failures=1000,
    )
    t0, c0, p0 = time.perf_counter(), _children_cpu(), time.process_time()
    out = simulate_fleet(cfg, workers=args.workers)
    fleet_wall, fleet_cpu = time.perf_counter() - t0, _children_cpu() - c0
    t = out["totals"]
    if t["workers"] == 1:  # no pool: the clusters ran in this process
        fleet_cpu = time.process_time() - p0
    print(
        f"meta-600k {t['clusters']} clusters: {fleet_wall:.1f} s wall with {t['workers']} "
        f"workers ({fleet_cpu:.1f} s CPU, {fleet_cpu / t['workers']:.1f} s per worker), "
        f"{t['hosts_visited'] + t['hosts_quarantined']}/{t['hosts_total']} hosts, "
        f"fleet makespan {t['makespan_hours']} h, {t['job_interruptions']} interruptions, "
        f"{t['lost_gpu_hours']:.0f} GPU-h lost, {t['budget_violations']} violations"
    )
    print(
        f"ratio to 25 x one cluster: {fleet_wall / (25 * one_wall):.2f} wall, "
        f"{fleet_cpu / (25 * one_cpu):.2f} CPU (goals: one cycle <= 20 s, fleet <= 60 s)"
    )


def _children_cpu() -> float:
    """CPU seconds of this process's ended children (the pool's workers, once it is shut)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


if __name__ == "__main__":
    main()
