"""Job negotiation on and off: interruptions and lost GPU-hours, as ratios from one run.

One 30-day campaign on ``meta-24k`` per drain policy, same seed, budget and job trace, once with
every job asked before its eviction (``drain.negotiate``, the default: go / wait for my
checkpoint or end / not now at most ``max_refusals`` times) and once evicting as the policy
says; prints each pair's interruptions, lost GPU-hours and makespan, the ratios with over
without, and the answers the jobs gave (``sim_negotiation`` describes the behaviour mix).

    nice python benchmarks/bench_negotiation.py [--preset meta-24k] [--days 30] [--seed 1]
        [--budget 3%] [--policies job-aware,rolling-serial,drain-wait] [--max-refusals 2]
"""

from __future__ import annotations

import argparse
import time

from orchestrator.contracts.models import CapacityBudget
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig
from orchestrator.simulator.engine import Engine


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="meta-24k")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", default="3%")
    ap.add_argument("--max-wait", type=float, default=4.0, help="hours")
    ap.add_argument("--max-refusals", type=int, default=2)
    ap.add_argument("--policies", default="job-aware,rolling-serial,drain-wait")
    ap.add_argument("--halt-after", type=int, default=1000, help="halt_after_failures")
    args = ap.parse_args()
    preset = get_preset(args.preset)
    print(
        f"{preset.name}, {args.days:g} days, budget {args.budget}, seed {args.seed}, "
        f"max_wait {args.max_wait:g} h, max_refusals {args.max_refusals}"
    )
    head = "| policy | negotiate | interruptions | lost GPU-h | makespan h | answers | wall s |"
    print(head + "\n|---|---|---:|---:|---:|---|---:|")
    ratios = []
    for policy in args.policies.split(","):
        runs = {}
        for negotiate in (False, True):
            cfg = SimConfig(
                preset=preset,
                policy=policy,
                budget=CapacityBudget(max_unavailable=args.budget),
                days=args.days,
                seed=args.seed,
                max_wait_hours=args.max_wait,
                halt_after_failures=args.halt_after,
                negotiate=negotiate,
                max_refusals=args.max_refusals,
            )
            start = time.perf_counter()
            engine = Engine(build_cluster(preset, args.seed), cfg)
            r = engine.run()
            wall = time.perf_counter() - start
            runs[negotiate] = r
            answers = ", ".join(f"{k} {v}" for k, v in sorted(engine.tally.answers.items())) or "-"
            span = "n/a" if r.makespan_hours is None else f"{r.makespan_hours:.1f}"
            print(
                f"| {policy} | {'yes' if negotiate else 'no'} | {r.job_interruptions} | "
                f"{r.lost_work_gpu_hours:,.1f} | {span} | {answers} | {wall:.0f} |"
            )
        off, on = runs[False], runs[True]
        ratios.append(
            f"{policy}: interruptions {_ratio(on.job_interruptions, off.job_interruptions)}x, "
            f"lost GPU-h {_ratio(on.lost_work_gpu_hours, off.lost_work_gpu_hours)}x, makespan "
            f"{_ratio(on.makespan_hours or 0.0, off.makespan_hours or 0.0)}x (with / without)"
        )
    print("\n".join(ratios))


if __name__ == "__main__":
    main()
