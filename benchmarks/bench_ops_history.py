"""Benchmark: history sizes of a fleet-wide CUDA upgrade, which continues as new as it goes.

Builds the fleet at ``--speed max`` in a temporary directory, starts its own Temporal dev server
and a worker, runs one CUDA operation over the scope through ``orchestrator.ops.client`` (what
``trainctl ops start --wait`` does, following the operation's runs to its end), then walks every
run of the ``BulkOperation`` and of each ``ClusterOperation`` and prints the largest history of
any run (the goal: under 10,000 events), how many runs each took, the events all runs held
together (what one run would have held without continue-as-new), and those events per host
changed: the Temporal actions the operation cost per host. The fleet's audit must pass.

    python benchmarks/bench_ops_history.py                      # meta-600k, all 25 clusters
    python benchmarks/bench_ops_history.py --preset meta-24k    # one 3,072-host cluster
    python benchmarks/bench_ops_history.py --preset small --max-history-events 200   # seconds
    python benchmarks/bench_ops_history.py --scope 'c0[0-2]' --racks 'z00-*'          # a subset
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.ops_types import MAX_HISTORY_EVENTS, OperationStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import OperationSpec, resolve_clusters
from orchestrator.ops.client import start_operation

sys.path.insert(0, str(Path(__file__).parent))
from dev_server import dev_server  # noqa: E402

GOAL = 10_000  # events in any one run


async def run_lengths(client: Client, workflow_id: str) -> list[int]:
    """History length of every run of ``workflow_id``, first to last."""
    desc = await client.get_workflow_handle(workflow_id).describe()
    run_id: str | None = desc.raw_description.workflow_execution_info.first_run_id
    lengths = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        lengths.append(len(history.events))
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return lengths


def make_spec(args: argparse.Namespace) -> OperationSpec:
    scope: dict[str, Any] = {"cluster": args.scope}
    if args.racks:
        scope["racks"] = args.racks
    return OperationSpec.model_validate(
        {
            "kind": "cuda-upgrade",
            "scope": scope,
            "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
            "budget": {"max_unavailable": args.budget},
            "drain": {"max_wait": "2h"},
            "max_failures": args.max_failures,
            "request_id": f"bench-history-{uuid.uuid4().hex[:6]}",
        }
    )


def figures(
    status: OperationStatus, op: list[int], children: dict[str, list[int]]
) -> dict[str, Any]:
    every = [n for runs in (op, *children.values()) for n in runs]
    total = sum(every)
    return {
        "state": status.state,
        "reason": status.reason,
        "clusters": len(children),
        "hosts_in_scope": sum(c.hosts_in_scope for c in status.clusters.values()),
        "hosts_changed": status.hosts_changed,
        "hosts_quarantined": status.hosts_quarantined,
        "hosts_deferred": status.hosts_deferred,
        "waves": status.waves_done,
        "operation_runs": len(op),
        "operation_largest_run": max(op),
        "operation_events_all_runs": sum(op),
        "cluster_runs_max": max(len(r) for r in children.values()),
        "cluster_runs_total": sum(len(r) for r in children.values()),
        "cluster_largest_run": max(max(r) for r in children.values()),
        "cluster_events_all_runs_max": max(sum(r) for r in children.values()),
        "largest_run": max(every),
        "events_total": total,
        "events_per_host_changed": round(total / max(1, status.hosts_changed), 2),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    env = await dev_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "fleet.db"
            spec = make_spec(args)
            t0 = time.perf_counter()
            fleet = SqliteFleet.create(path, get_preset(args.preset), args.seed, MAX_SPEED)
            clusters = resolve_clusters(spec.scope, fleet.cluster_names())
            fleet.close()
            build_s = time.perf_counter() - t0
            tq = f"bench-{uuid.uuid4().hex[:6]}"
            async with build_worker(env.client, path, tq):
                t0 = time.perf_counter()
                start = await start_operation(
                    env.client,
                    spec,
                    clusters=clusters,
                    task_queue=tq,
                    wait=True,
                    max_history_events=args.max_history_events,
                )
                wall_s = time.perf_counter() - t0
            assert start.status is not None
            status = start.status
            op = await run_lengths(env.client, start.operation_id)
            children = {
                name: await run_lengths(env.client, c.workflow_id)
                for name, c in status.clusters.items()
                if not c.reason.startswith("not started")
            }
            fleet = SqliteFleet(path)
            try:
                report = audit(fleet)
            finally:
                fleet.close()
    finally:
        await env.shutdown()
    out = {
        "preset": args.preset,
        "scope": args.scope + (f" racks {args.racks}" if args.racks else ""),
        "budget": args.budget,
        "max_history_events": args.max_history_events,
        "fleet_build_s": round(build_s, 1),
        "wall_s": round(wall_s, 1),
        **figures(status, op, children),
        "audit_ok": report.ok,
        "per_cluster_runs": {name: runs for name, runs in children.items()},
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="meta-600k")
    parser.add_argument("--scope", default="c*", help="cluster glob (default: every cluster)")
    parser.add_argument("--racks", nargs="*", default=None, help="rack globs, e.g. 'z00-*'")
    parser.add_argument("--budget", default="3%", help="max_unavailable per cluster (the default)")
    parser.add_argument("--max-failures", type=int, default=100)
    parser.add_argument("--max-history-events", type=int, default=MAX_HISTORY_EVENTS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    stdout = os.dup(1)
    os.dup2(2, 1)  # the dev server prints its banner on the stdout it inherits: keep ours clean
    try:
        out = asyncio.run(bench(args))
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
    if args.json:
        print(json.dumps(out))
        return
    runs = out.pop("per_cluster_runs")
    width = max(len(k) for k in out)
    for key, value in out.items():
        print(f"{key:<{width}}  {value}")
    print(f"{'runs per cluster':<{width}}  " + ", ".join(f"{c}: {r}" for c, r in runs.items()))
    verdict = "under" if out["largest_run"] < GOAL else "OVER"
    print(f"largest history of any run: {out['largest_run']:,} events ({verdict} {GOAL:,})")


if __name__ == "__main__":
    main()
