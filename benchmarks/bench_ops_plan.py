"""Benchmark: plan a fleet-wide CUDA upgrade over meta-600k (76,800 hosts, 614,400 GPUs).

Builds the fleet in a temporary directory, then times what ``trainctl ops plan`` does: peek every
cluster (load from SQLite and advance, read-only), turn each into a snapshot, plan, and serialise
the plan to JSON. Each figure is the best of ``--repeat`` runs and is also given as a ratio to a
baseline measured in the same run: merely listing every host row of the fleet from SQLite, the
least any planner reading this fleet must do.

    python benchmarks/bench_ops_plan.py [--preset meta-600k] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import parse_spec_text, resolve_clusters
from orchestrator.planning.ops_plan import OperationPlan, holders_in, plan_operation

T = TypeVar("T")
SPEC = {
    "kind": "cuda-upgrade",
    "scope": {"cluster": "c*"},
    "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
    "request_id": "bench-cuda-12.6",
}


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """Fastest wall time of ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    assert out is not None
    return best, out


def run(preset_name: str, seed: int, repeat: int) -> dict[str, Any]:
    preset = get_preset(preset_name)
    spec = parse_spec_text(json.dumps(SPEC))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        fleet = SqliteFleet.create(Path(tmp) / "fleet.db", preset, seed, MAX_SPEED)
        init_s = time.perf_counter() - t0
        try:
            names = resolve_clusters(spec.scope, fleet.cluster_names())
            baseline_s, rows = best_of(
                repeat, lambda: fleet.db.read(sa.text("SELECT * FROM hosts"))
            )
            peek_s, sims = best_of(repeat, lambda: [fleet.peek(n) for n in names])
        finally:
            fleet.close()

    def snapshots(sims: list[ClusterSim] = sims) -> dict[str, Any]:
        return {s.name: s.snapshot() for s in sims}

    snap_s, snaps = best_of(repeat, snapshots)
    holders = holders_in(snaps.values())
    plan_s, plan = best_of(repeat, lambda: plan_operation(spec, snaps, holders))
    json_s, text = best_of(repeat, plan.model_dump_json)
    assert isinstance(plan, OperationPlan) and plan.refused is None, plan.refused
    steps = {
        "baseline: list every host row": baseline_s,
        "peek clusters (load + advance)": peek_s,
        "snapshot": snap_s,
        "plan_operation (pure)": plan_s,
        "plan to JSON": json_s,
        "total (peek+snapshot+plan+JSON)": peek_s + snap_s + plan_s + json_s,
    }
    return {
        "preset": preset.name,
        "hosts": len(rows),
        "clusters": len(names),
        "fleet_init_seconds": round(init_s, 2),
        "seconds": {k: round(v, 4) for k, v in steps.items()},
        "ratio_to_baseline": {k: round(v / baseline_s, 2) for k, v in steps.items()},
        "plan": {
            "waves": len(plan.waves),
            "hosts_to_change": plan.hosts_to_change,
            "estimated_duration_hours": plan.estimated_duration_hours,
            "jobs_interrupted": plan.jobs_interrupted,
            "gpu_hours_out_of_service": plan.gpu_hours_out_of_service,
            "json_bytes": len(text),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="meta-600k")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()
    out = run(args.preset, args.seed, max(1, args.repeat))
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"{out['preset']}: {out['hosts']:,} hosts in {out['clusters']} clusters "
        f"(fleet init {out['fleet_init_seconds']} s, not timed below)"
    )
    print(f"{'step':<34} {'seconds':>9} {'x baseline':>11}")
    for step, sec in out["seconds"].items():
        print(f"{step:<34} {sec:>9.3f} {out['ratio_to_baseline'][step]:>11.2f}")
    p = out["plan"]
    print(
        f"plan: {p['hosts_to_change']:,} hosts in {p['waves']:,} waves, "
        f"~{p['estimated_duration_hours']:.1f} h, {p['jobs_interrupted']} jobs interrupted, "
        f"{p['gpu_hours_out_of_service']:,.0f} GPU-hours out of service, "
        f"JSON {p['json_bytes'] / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
