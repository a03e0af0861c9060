"""Schedule quality of the four drain policies on one fleet, as ratios from one run.

One 30-day campaign on ``meta-24k`` per policy, same seed, budget and job trace; prints each
policy's makespan over the issue's capacity lower bound (``/ bound``: maintenance work over the
hosts the budget lets out at once) and over the bound after outages (``/ after out.``: the same
work over the budget left once hosts in repair or quarantine past the failure buffer have taken
their share: ``--budget`` is the maintenance budget, ``--max-unavailable`` the floor, 2 points above
it unless given), its interruptions and lost GPU-hours relative to
``rolling-serial``, and how fast the simulator ran (simulated fleet hours per wall second).

    python benchmarks/bench_policies.py [--preset meta-24k] [--days 30] [--seed 1] [--budget 3%]
        [--ideal-fleet]

``--ideal-fleet`` is a what-if that isolates the policies from the fleet's outages: no
unexpected failures and every install clean, so no host in repair or quarantine takes a share of
the budget (in the real model they hold about a third of a 3% budget on average over a cycle).
"""

from __future__ import annotations

import argparse
import time

from orchestrator.contracts.train_spec import POLICIES
from orchestrator.fleet import dynamics
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig, SimResult, simulate
from orchestrator.simulator.budget import sim_budget


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="meta-24k")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", default="3%", help="maintenance budget")
    ap.add_argument("--max-unavailable", default=None, help="floor (default: budget + 2 points)")
    ap.add_argument("--max-wait", type=float, default=4.0, help="hours")
    ap.add_argument("--ideal-fleet", action="store_true", help="no failures, clean installs")
    ap.add_argument(
        "--halt-after",
        type=int,
        default=3,
        help="the train's halt_after_failures (its default); a large value measures the policy "
        "alone, past the failures in a row that would halt a live train",
    )
    args = ap.parse_args()
    if args.ideal_fleet:
        dynamics.next_failure_gap = lambda *a, **k: float("inf")  # type: ignore[assignment]
        dynamics.draw_update_outcome = lambda *a, **k: dynamics.UpdateOutcome(  # type: ignore[assignment]
            True, False, None, None
        )
    preset = get_preset(args.preset)
    results: dict[str, SimResult] = {}
    for policy in POLICIES:
        cfg = SimConfig(
            preset=preset,
            policy=policy,
            budget=sim_budget(args.budget, args.max_unavailable, preset.hosts_per_cluster),
            days=args.days,
            seed=args.seed,
            max_wait_hours=args.max_wait,
            halt_after_failures=args.halt_after,
        )
        t0 = time.perf_counter()
        results[policy] = simulate(cfg)
        results[policy].wall_seconds = time.perf_counter() - t0
    base = results["rolling-serial"]
    first = next(iter(results.values()))
    print(
        f"{preset.name} cluster {first.cluster}: {first.hosts_total} hosts, {args.days:g} days, "
        f"seed {args.seed}, budget {args.budget} = {first.budget_hosts} hosts, domain "
        f"{first.domain_size}, max wait {args.max_wait:g} h, lower bound "
        f"{first.lower_bound_hours:.1f} h (work {first.lower_bound_hours * first.budget_hosts:.0f}"
        " host-hours)" + (" (ideal fleet: no failures, clean installs)" if args.ideal_fleet else "")
    )
    head = (
        f"{'policy':<15}{'visited':>9}{'makespan h':>12}{'/ bound':>9}{'out. mean':>11}"
        f"{'/ after out.':>14}{'interrupt.':>12}"
        f"{'/ rolling':>10}{'lost GPU-h':>12}{'/ rolling':>10}{'violations':>12}{'wall s':>9}"
        f"{'sim h / s':>11}"
    )
    print(head)
    print("-" * len(head))
    for policy, r in results.items():
        span = r.makespan_hours
        print(
            f"{policy:<15}{r.hosts_visited + r.hosts_quarantined:>9}"
            f"{(f'{span:.1f}' if span is not None else 'n/a'):>12}"
            f"{_fmt(r.makespan_ratio):>9}{r.outage_budget_hosts_mean:>11.1f}"
            f"{_fmt(r.makespan_ratio_after_outages):>14}"
            f"{r.job_interruptions:>12}{_ratio(r.job_interruptions, base.job_interruptions):>10}"
            f"{r.lost_gpu_hours:>12.0f}{_ratio(r.lost_gpu_hours, base.lost_gpu_hours):>10}"
            f"{r.budget_violations:>12}{r.wall_seconds:>9.2f}"
            f"{r.simulated_hours / r.wall_seconds:>11.0f}"
        )
    for policy, r in results.items():
        if r.halted:
            print(f"{policy}: halted as a live train would: {r.halted}")
    print(
        "visited = returned after verification + quarantined or in repair at the cycle's end; "
        "out. mean = mean hosts of the budget taken by repairs and quarantines; / after out. = "
        "makespan over work / (budget hosts - out. mean), the bound once outages took their share"
    )


if __name__ == "__main__":
    main()
