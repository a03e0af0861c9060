"""Benchmark (outside CI): false alarms and misses of the bad-build rule over staged rollouts.

A pure simulation of ``orchestrator.planning.failure_gate`` as a rollout uses it: stages of
hosts changed wave by wave, the gate looking after every wave at the stage's failures so far
among its changed hosts (``build_is_bad``), a stage stopping the rollout at its first bad look.
Host failures are drawn independently per host: at the fleet's base rate for a good build, at
base + 20% for a bad one (the issue's "a build breaking 20% of hosts").

- **False alarm**: a good build stopped at any stage of the whole rollout.
- **Miss**: a bad build that gets beyond its first cluster (passes the canary and the first
  cluster's stage); the share stopped in the canary is printed too.

Each rate comes with its 95% Wilson interval over ``--seeds`` rollouts (>= 1,000). The base rate
defaults to the fleet's own for a cuda-upgrade (``sim_health.component_failure_rate``, ~0.6%);
``--base-rate`` overrides it, ``--true-rate-factor`` draws good-build failures at a multiple of
the rate the gate assumes (a misestimated base rate). Goals: false alarms <= 1%, misses <= 1%.

    nice python benchmarks/bench_failure_gate.py [--seeds 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from orchestrator.fleet.sim_health import component_failure_rate
from orchestrator.planning.failure_gate import DEFAULT_FALSE_ALARM, build_is_bad, clamp_base_rate

#: How much a bad build adds to the base failure rate.
BAD_EXCESS = 0.20


@dataclass(frozen=True)
class Stage:
    name: str
    hosts: int
    wave: int  # hosts changed between two looks of the gate


#: A campaign as the issue's example spec runs it on the `multi` preset (4 clusters of 64):
#: a 4-host canary, the rest of its first cluster, then the other three clusters.
CAMPAIGN = (
    Stage("canary", 4, 4),
    Stage("first-cluster", 64, 8),
    Stage("rest-c01", 64, 8),
    Stage("rest-c02", 64, 8),
    Stage("rest-c03", 64, 8),
)
#: A bulk operation on meta-24k: one 3,072-host cluster, about 150 hosts a wave.
META_24K = (Stage("c00", 3072, 150),)
#: A bulk operation on `small`: 128 hosts in waves of 3 (the plan's 43 waves), 43 looks.
SMALL = (Stage("c00", 128, 3),)


def run_rollout(
    stages: tuple[Stage, ...], rate: float, assumed: float, rng: random.Random, alarm: float
) -> int:
    """Index of the stage that stopped the rollout, or len(stages) if none did."""
    for i, stage in enumerate(stages):
        changed = failures = 0
        while changed < stage.hosts:
            wave = min(stage.wave, stage.hosts - changed)
            failures += sum(rng.random() < rate for _ in range(wave))
            changed += wave
            if build_is_bad(failures, changed, assumed, alarm):
                return i
    return len(stages)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def rate_row(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"count": k, "of": n, "rate": k / n, "ci95": [lo, hi]}


def measure(
    stages: tuple[Stage, ...], base: float, seeds: int, alarm: float, factor: float
) -> dict[str, Any]:
    """False alarms of a good build and misses of a bad one over ``seeds`` rollouts each."""
    assumed = clamp_base_rate(base)
    good = [
        run_rollout(stages, base * factor, assumed, random.Random(f"good:{s}"), alarm)
        for s in range(seeds)
    ]
    bad = [
        run_rollout(stages, base + BAD_EXCESS, assumed, random.Random(f"bad:{s}"), alarm)
        for s in range(seeds)
    ]
    first_cluster = min(1, len(stages) - 1)  # the stage a bad build must not get beyond
    out: dict[str, Any] = {
        "stages": [f"{s.name}:{s.hosts}/{s.wave}" for s in stages],
        "base_rate": assumed,
        "good_build_rate": base * factor,
        "bad_build_rate": base + BAD_EXCESS,
        "false_alarm": rate_row(sum(i < len(stages) for i in good), seeds),
        "miss": rate_row(sum(i > first_cluster for i in bad), seeds),
        "bad_stopped_in_first_stage": rate_row(sum(i == 0 for i in bad), seeds),
    }
    return out


def pct(row: dict[str, Any]) -> str:
    lo, hi = row["ci95"]
    return f"{row['rate']:.2%} [{lo:.2%}, {hi:.2%}] ({row['count']}/{row['of']})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10_000)
    ap.add_argument("--base-rate", type=float, default=None)
    ap.add_argument("--false-alarm", type=float, default=DEFAULT_FALSE_ALARM)
    ap.add_argument("--true-rate-factor", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.seeds < 1000:
        ap.error("--seeds: at least 1,000")
    base = args.base_rate
    if base is None:
        base = component_failure_rate(["gpu_driver", "cuda"])
    scenarios = {"campaign (multi)": CAMPAIGN, "ops meta-24k": META_24K, "ops small": SMALL}
    results = {
        name: measure(stages, base, args.seeds, args.false_alarm, args.true_rate_factor)
        for name, stages in scenarios.items()
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"bad-build rule: one-sided exact binomial, false alarm {args.false_alarm:g} per look; "
        f"base rate {clamp_base_rate(base):.3%} (good builds fail at "
        f"{base * args.true_rate_factor:.3%}, bad at {base + BAD_EXCESS:.3%}); "
        f"{args.seeds:,} rollouts each"
    )
    for name, r in results.items():
        print(f"\n{name}: stages {', '.join(r['stages'])} (hosts/wave)")
        print(f"  false alarms (good build stopped anywhere): {pct(r['false_alarm'])}")
        if len(r["stages"]) > 1:
            print(f"  misses (bad build beyond its first cluster): {pct(r['miss'])}")
            print(f"  bad build stopped in the canary: {pct(r['bad_stopped_in_first_stage'])}")
        else:
            print(f"  bad build stopped in the cluster: {pct(r['bad_stopped_in_first_stage'])}")


if __name__ == "__main__":
    main()
