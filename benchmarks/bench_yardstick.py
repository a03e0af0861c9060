"""The yardstick: every policy over a fixed 30-day horizon, judged against ``none``.

For each seed and policy it runs the done-when command exactly as a user types it,

    trainctl simulate --preset meta-24k --horizon 30d --target-every 7d --cycle-target 72h
        --policy P --seed N --json

(3% maintenance budget, 5% floor; one invocation runs the policy and the ``none`` baseline of the
same seed and horizon), and prints the README's policy table: goodput, maintenance cost and its
parts (checkpoint writes asked for are 0 until a train asks for one), the baseline difference
and its residual, the maintenance work, cycles completed (and meeting the target),
visit-interval p95/max, ETTR of the largest jobs, utilisation, budget violations; then the goals
per seed (job-aware's cost <= 1.0x its work and <= 0.3x rolling-serial's, every cycle within
target, 0 violations, ``none`` at 0.88-0.92 utilisation).

    nice python benchmarks/bench_yardstick.py [--seeds 1,2,3,4] [--jobs 2] [--out DIR]
    nice python benchmarks/bench_yardstick.py --wall    # wall time of the command (policy and
                                                        # baseline), meta-24k and meta-600k

Runs go through the CLI in subprocesses, ``--jobs`` at a time (``--wall`` runs one at a time).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

POLICIES = ("none", "job-aware", "rolling-serial", "drain-wait", "slurm-asap")
COMMAND = ["--horizon", "30d", "--target-every", "7d", "--cycle-target", "72h"]
GOAL_COST_OVER_WORK, GOAL_COST_OVER_ROLLING = 1.0, 0.3
GOAL_UTILISATION = (0.88, 0.92)
#: Goals of the wall time of one command (policy and baseline), seconds.
GOAL_WALL = {"meta-24k": 30.0, "meta-600k": 180.0}


def _run(preset: str, policy: str, seed: int, out: Path | None) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-c",
        "from orchestrator.app.cli import entrypoint; entrypoint()",
        "simulate",
        "--preset",
        preset,
        *COMMAND,
        "--policy",
        policy,
        "--seed",
        str(seed),
        "--json",
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    res: dict[str, Any] = json.loads(done.stdout)
    res["_wall"] = time.perf_counter() - t0
    if out is not None:
        (out / f"{preset}-{policy}-{seed}.json").write_text(json.dumps(res, indent=1))
    return res


def _k(x: float | None) -> str:
    return "-" if x is None else f"{x / 1000:,.1f}k"


def _row(policy: str, seed: int, o: dict[str, Any]) -> str:
    parts = o["cost_parts"]
    vi = o.get("visit_interval_hours") or {}
    done = o["cycles_completed"]
    met = o.get("cycles_meeting_target")
    ettr = o["ettr"].get("gt512")
    cells = [
        str(seed),
        policy,
        _k(o["goodput_gpu_hours"]),
        _k(o["maintenance_cost_gpu_hours"]),
        " / ".join(_k(parts[p]) for p in ("held_idle", "drain_wait", "lost_work", "restart")),
        "-" if policy == "none" else _k(o.get("baseline_difference_gpu_hours")),
        "-" if policy == "none" else _k(o.get("residual_gpu_hours")),
        _k(o["maintenance_work_gpu_hours"]),
        "-" if o.get("cost_over_work") is None else f"{o['cost_over_work']:.2f}",
        f"{done}" + ("" if met is None or policy == "none" else f" ({met})"),
        "-" if not vi.get("p95") else f"{vi['p95']:.0f} / {vi['max']:.0f}",
        "-" if ettr is None else f"{ettr:.3f}",
        f"{o['utilisation']:.3f}",
        str(o["budget_violations"]),
        str(o.get("maintenance_interruptions", 0)),
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| seed | policy | goodput GPU-h | maintenance cost | held_idle / drain_wait / lost_work / "
    "restart | baseline difference | residual | work GPU-h | cost / work | cycles (in target) | "
    "visit interval p95 / max h | ETTR gt512 | util. | viol. | interr. |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def table(runs: dict[tuple[str, int], dict[str, Any]], seeds: list[int]) -> str:
    lines = [HEADER]
    for seed in seeds:
        lines += [_row(p, seed, runs[(p, seed)]) for p in POLICIES if (p, seed) in runs]
    return "\n".join(lines)


def goals(runs: dict[tuple[str, int], dict[str, Any]], seeds: list[int]) -> str:
    lines = [
        "| seed | job-aware cost / work (<= 1.0) | / rolling-serial (<= 0.3) | cycles in target "
        "| violations | none utilisation (0.88-0.92) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for seed in seeds:
        ja, rs, no = (runs.get((p, seed)) for p in ("job-aware", "rolling-serial", "none"))
        if ja is None or rs is None or no is None:
            continue
        vs = ja["maintenance_cost_gpu_hours"] / max(1e-9, rs["maintenance_cost_gpu_hours"])
        cow = ja["cost_over_work"]
        done = ja["cycles_completed"]
        met = ja["cycles_meeting_target"]
        util = no["utilisation"]
        lo, hi = GOAL_UTILISATION
        lines.append(
            f"| {seed} | {cow:.2f} {'yes' if cow <= GOAL_COST_OVER_WORK else 'NO'} "
            f"| {vs:.2f} {'yes' if vs <= GOAL_COST_OVER_ROLLING else 'NO'} "
            f"| {met}/{done} {'yes' if met == done else 'NO'} "
            f"| {ja['budget_violations']} {'yes' if ja['budget_violations'] == 0 else 'NO'} "
            f"| {util:.3f} {'yes' if lo <= util <= hi else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3,4")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--wall", action="store_true", help="time the command on both presets")
    args = ap.parse_args()
    if args.wall:
        for preset in ("meta-24k", "meta-600k"):
            o = _run(preset, "job-aware", 1, args.out)
            goal = GOAL_WALL[preset]
            row = o.get("totals", o)
            print(
                f"{preset}: job-aware + none baseline, 30 days: {o['_wall']:.1f} s wall "
                f"(goal <= {goal:.0f} s: {'yes' if o['_wall'] <= goal else 'NO'}); "
                f"cost {row.get('maintenance_cost_gpu_hours')} GPU-h, "
                f"work {row.get('maintenance_work_gpu_hours')} GPU-h",
                flush=True,
            )
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    todo = [(p, s) for s in seeds for p in POLICIES]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda ps: _run("meta-24k", ps[0], ps[1], args.out), todo))
    runs = dict(zip(todo, results, strict=True))
    print(table(runs, seeds))
    print()
    print(goals(runs, seeds))


if __name__ == "__main__":
    main()
