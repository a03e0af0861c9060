"""Issue 13's done-when, seed by seed: job-aware against rolling-serial on meta-24k.

For each seed it runs the done-when command exactly as a user types it,
``trainctl simulate --preset meta-24k --policy P --seed N --json`` (maintenance budget 3%, floor
5%, the simulate defaults), for ``job-aware`` and ``rolling-serial``, and prints one row per seed:
makespan against ``lower_bound_hours`` (goal <= 1.10), interruptions and lost GPU-hours against
rolling-serial's in the same run (goals <= 0.10 and <= 0.05), piggybacked hosts, job-aware's
utilisation (mean fraction of hosts running a job: what steering must not cost), budget
violations and hosts visited or quarantined of all, with a yes/no per goal.

    nice python benchmarks/bench_policy_seeds.py [--seeds 1,2,3,4] [--jobs 2] [--out DIR]
        [--from DIR] [--targets 66h,63h] [-- extra simulate options]

``--targets`` adds, per seed, job-aware under each ``--cycle-target``: the front between pace and
interruptions an operator chooses on (seed 1 cannot have both goals at once).

Runs go through the CLI in subprocesses, ``--jobs`` at a time (each is 30-60 s of one core);
``--out DIR`` keeps every run's JSON (``DIR/<policy>-<seed>.json``) to compare before/after a
change.
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

POLICIES = ("job-aware", "rolling-serial")
GOAL_MAKESPAN, GOAL_INTERRUPTIONS, GOAL_LOST = 1.10, 0.10, 0.05


def _run(policy: str, seed: int, extra: list[str], out: Path | None) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-c",
        "from orchestrator.app.cli import entrypoint; entrypoint()",
        "simulate",
        "--preset",
        "meta-24k",
        "--policy",
        policy,
        "--seed",
        str(seed),
        "--json",
        *extra,
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    res: dict[str, Any] = json.loads(done.stdout)
    res["_wall"] = time.perf_counter() - t0
    if out is not None:
        (out / f"{policy}-{seed}.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    return res


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def _ratio(a: float, b: float) -> float:
    return a / b if b else (0.0 if a == 0 else float("inf"))


def row(seed: int, ja: dict[str, Any], rs: dict[str, Any]) -> tuple[str, bool]:
    """One table row and whether every goal of the seed is met."""
    bound = ja["lower_bound_hours"]
    span = ja["makespan_hours"]
    m = _ratio(span, bound) if span is not None else float("inf")
    rs_m = _ratio(rs["makespan_hours"], bound) if rs["makespan_hours"] is not None else None
    i = _ratio(ja["job_interruptions"], rs["job_interruptions"])
    lost = _ratio(ja["lost_gpu_hours"], rs["lost_gpu_hours"])
    done = ja["hosts_visited"] + ja["hosts_quarantined"]
    ok_all = done == ja["hosts_total"]
    viol = (ja["budget_violations"], rs["budget_violations"])
    goals = [m <= GOAL_MAKESPAN, i <= GOAL_INTERRUPTIONS, lost <= GOAL_LOST, ok_all, viol[0] == 0]
    text = (
        f"| {seed} | {span if span is None else f'{span:.1f}'} | {bound:.1f} "
        f"| {m:.2f} {_yes(goals[0])} | {'-' if rs_m is None else f'{rs_m:.2f}'} "
        f"| {ja['job_interruptions']}/{rs['job_interruptions']} | {i:.3f} {_yes(goals[1])} "
        f"| {ja['lost_gpu_hours']:,.0f}/{rs['lost_gpu_hours']:,.0f} | {lost:.4f} {_yes(goals[2])} "
        f"| {ja['piggybacked_hosts']} | {ja.get('utilisation', 0.0):.2f} "
        f"| {viol[0]}/{viol[1]} {_yes(goals[4])} "
        f"| {done}/{ja['hosts_total']} {_yes(ok_all)} | {ja.get('halted') or '-'} |"
    )
    return text, all(goals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", default="1,2,3,4")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (each takes one core)")
    ap.add_argument("--out", type=Path, default=None, help="keep each run's JSON here")
    ap.add_argument(
        "--from", dest="saved", type=Path, default=None, help="print the table of an --out DIR"
    )
    ap.add_argument(
        "--targets", default="", help="cycle targets to run job-aware under too, e.g. 66h,63h"
    )
    ap.add_argument("extra", nargs="*", help="more simulate options (after --)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    runs = [(p, s) for s in seeds for p in POLICIES]
    if args.saved is not None:
        results = {r: json.loads((args.saved / f"{r[0]}-{r[1]}.json").read_text()) for r in runs}
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {r: pool.submit(_run, *r, args.extra, args.out) for r in runs}
            results = {r: f.result() for r, f in futures.items()}
    extra = " ".join(args.extra)
    print(f"trainctl simulate --preset meta-24k --policy P --seed N --json {extra}".rstrip())
    print(
        "| seed | job-aware h | bound h | / bound (<= 1.10) | rolling / bound "
        "| interruptions ja/rs | ratio (<= 0.10) | lost GPU-h ja/rs | ratio (<= 0.05) "
        "| piggybacked | utilisation ja | violations ja/rs | visited+quar. | halted |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    met = 0
    for s in seeds:
        text, ok = row(s, results[("job-aware", s)], results[("rolling-serial", s)])
        met += ok
        print(text)
    walls = ", ".join(f"{p} {s}: {results[(p, s)]['_wall']:.0f} s" for p, s in runs)
    print(f"seeds meeting every goal: {met}/{len(seeds)}; wall per run: {walls}")
    targets = [t for t in args.targets.split(",") if t]
    if targets:
        _front(seeds, targets, results, args)


def _front(
    seeds: list[int], targets: list[str], results: dict[tuple[str, int], Any], args: Any
) -> None:
    """Job-aware under each cycle target, against the same rolling-serial runs."""
    runs = [(t, s) for s in seeds for t in targets]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            r: pool.submit(_run, "job-aware", r[1], [*args.extra, "--cycle-target", r[0]], None)
            for r in runs
        }
        fronts = {r: f.result() for r, f in futures.items()}
    print()
    print(
        "| seed | cycle target | / bound (<= 1.10) | interruptions ja/rs | ratio (<= 0.10) "
        "| utilisation | all goals |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for s in seeds:
        rs = results[("rolling-serial", s)]
        for t in ["-", *targets]:
            ja = results[("job-aware", s)] if t == "-" else fronts[(t, s)]
            _, ok = row(s, ja, rs)
            m = _ratio(ja["makespan_hours"] or float("inf"), ja["lower_bound_hours"])
            i = _ratio(ja["job_interruptions"], rs["job_interruptions"])
            print(
                f"| {s} | {t} | {m:.3f} | {ja['job_interruptions']}/{rs['job_interruptions']} "
                f"| {i:.3f} | {ja.get('utilisation', 0.0):.2f} | {_yes(ok)} |"
            )


if __name__ == "__main__":
    main()
