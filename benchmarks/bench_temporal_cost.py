"""Temporal cost of the train and of a bulk operation: billable actions and history events per host.

Each scenario gets its own dev server (started by this script), a fleet at ``--speed`` (3,600
fleet seconds per wall second by default: the shape users run, a child workflow per domain) in a
temporary directory and a worker (``orchestrator.app.worker.build_worker``, the product's own):

* ``small``: one train cycle of ``small`` (128 hosts), domain 8, the demo's budget (10%);
* ``meta``: one train cycle of ``meta-24k`` (3,072 hosts), budget 3%, domain 92;
* ``cuda``: one CUDA operation over ``meta-24k``: ``examples/cuda.yaml`` (cuda-upgrade, job
  consistency, budget 25%, drain 2h) with its ``max_failures: 3`` left to the bad-build rule, as
  the README's plain cuda-upgrade over meta-24k (with 3 it stops at its first wave there; pass
  ``--cuda-max-failures 3`` to measure that).

The trains are specs of ``trainctl demo --until-cycle-complete`` (its targets, drain and halt
rule); the operation is started and waited for as ``trainctl ops start --wait`` does. When the
scenario has ended (or its ``--timeout`` passed: the train is asked to stop, the figures are then
partial and say so) the worker stops, and every workflow the server knows is listed, each run's
history fetched (continue-as-new runs followed) and its events counted as Temporal Cloud bills
them, as ``temporal_tally.py`` says.

Activations: every workflow task's time from started to completed in the histories (the
worker running the workflow's code and answering), p99 and maximum per workflow type, beside
the same figures of a no-op workflow (eight no-op activities) run on the same server and worker
process after the scenario: the baseline of this machine at that moment.

The peak actions per second buckets every billable event's time (history event times, the
interceptor's wall times) per second. The projection for ``meta-600k`` is 25 trains of
``meta-24k`` size at that same peak at once, against the 500 actions/s a namespace is allowed by
default; at real fleet time the rate is the actions over the cycle's fleet-seconds.

    nice python benchmarks/bench_temporal_cost.py                        # all three, ~7 min
    nice python benchmarks/bench_temporal_cost.py --scenarios small      # about 30 s
    nice python benchmarks/bench_temporal_cost.py --scenarios meta,cuda --json

Outside CI; a measurement, not a test.
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
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from orchestrator.app.demo import demo_spec
from orchestrator.app.worker import build_worker, heartbeat
from orchestrator.contracts.ops_spec import load_spec, operation_id
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import parse_speed
from orchestrator.ops import resolve_clusters
from orchestrator.ops.client import operation_status, start_operation
from orchestrator.train.client import control_train, start_train, train_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
from dev_server import dev_server  # noqa: E402
from noop_workflow import NoopHost, noop  # noqa: E402
from temporal_tally import KINDS, Meter, activations, peak, read_histories  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

NAMESPACE_LIMIT = 500  # actions per second a Temporal Cloud namespace is allowed by default
MEGA_TRAINS = 25  # meta-600k: 25 clusters of meta-24k size, one train each

# --------------------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    name: str
    preset: str
    title: str
    per: str  # what the actions are divided by
    run: Callable[[Client, Path, str, float], Awaitable[dict[str, Any]]]


async def run_train(
    client: Client, path: Path, tq: str, timeout: float, preset: str, domain: int, budget: str
) -> dict[str, Any]:
    spec = demo_spec(preset, domain, budget, until_cycle=True)
    await start_train(client, spec, task_queue=tq, replace=True)
    timed_out = False
    t0 = time.perf_counter()
    try:
        status = await asyncio.wait_for(train_result(client, spec.cluster), timeout)
    except TimeoutError:
        timed_out = True
        await control_train(client, spec.cluster, "stop", "benchmark timeout")
        status = await asyncio.wait_for(train_result(client, spec.cluster), 120)
    wall = time.perf_counter() - t0
    return {
        "state": status.state,
        "reason": status.reason,
        "timed_out": timed_out,
        "wall_s": round(wall, 1),
        "hosts_total": status.hosts_total,
        "hosts_visited": status.hosts_visited_this_cycle,
        "hosts_quarantined": status.quarantined + status.in_repair,
        "visits": status.visits_total or status.hosts_visited_this_cycle,
        "cycle_fleet_hours": round(status.last_cycle_fleet_hours or status.fleet_hours, 3),
        "job_interruptions": status.jobs_interrupted,
        "lost_gpu_hours": round(status.lost_gpu_hours, 3),
    }


#: ``max_failures`` of the CUDA operation: None leaves it to the bad-build rule (as the README's
#: plain cuda-upgrade over meta-24k); examples/cuda.yaml's own 3 stops it at its first wave there.
CUDA_MAX_FAILURES: list[int | None] = [None]


async def run_cuda(client: Client, path: Path, tq: str, timeout: float) -> dict[str, Any]:
    spec = load_spec(ROOT / "examples" / "cuda.yaml").model_copy(
        update={"max_failures": CUDA_MAX_FAILURES[0]}
    )
    fleet = SqliteFleet(path)
    try:
        clusters = resolve_clusters(spec.scope, fleet.cluster_names())
        t0 = time.perf_counter()
        hours0 = fleet.fleet_time(cluster=clusters[0])
    finally:
        fleet.close()
    timed_out = False
    try:
        start = await asyncio.wait_for(
            start_operation(client, spec, clusters=clusters, task_queue=tq, wait=True), timeout
        )
        status = start.status
    except TimeoutError:  # where it stands; it stops with the worker
        timed_out = True
        status = await operation_status(client, operation_id(spec))
    wall = time.perf_counter() - t0
    assert status is not None
    fleet = SqliteFleet(path)
    try:
        hours = fleet.fleet_time(cluster=clusters[0]) - hours0
    finally:
        fleet.close()
    return {
        "state": status.state,
        "reason": status.reason,
        "max_failures": spec.max_failures,
        "timed_out": timed_out,
        "wall_s": round(wall, 1),
        "hosts_changed": status.hosts_changed,
        "hosts_quarantined": status.hosts_quarantined,
        "waves": status.waves_done,
        "visits": status.hosts_changed,
        "cycle_fleet_hours": round(hours, 3),
        "job_interruptions": status.jobs_interrupted,
    }


SCENARIOS = {
    "small": Scenario(
        "small",
        "small",
        "train cycle, small, domain 8, budget 10%",
        "host visit",
        lambda c, p, tq, to: run_train(c, p, tq, to, "small", 8, "10%"),
    ),
    "meta": Scenario(
        "meta",
        "meta-24k",
        "train cycle, meta-24k, domain 92, budget 3%",
        "host visit",
        lambda c, p, tq, to: run_train(c, p, tq, to, "meta-24k", 92, "3%"),
    ),
    "cuda": Scenario(
        "cuda",
        "meta-24k",
        "cuda-upgrade (examples/cuda.yaml) over meta-24k",
        "host changed",
        run_cuda,
    ),
}


async def noop_baseline(client: Client, hosts: int = 20) -> None:
    """``hosts`` no-op host workflows on their own task queue, run to the end: their histories
    give the activation baseline."""
    tq = f"noop-{uuid.uuid4().hex[:6]}"
    with ThreadPoolExecutor(max_workers=4) as pool:
        worker = Worker(
            client, task_queue=tq, workflows=[NoopHost], activities=[noop], activity_executor=pool
        )
        async with worker:
            handles = [
                await client.start_workflow(NoopHost.run, f"h{i}", id=f"{tq}-{i}", task_queue=tq)
                for i in range(hosts)
            ]
            await asyncio.gather(*(h.result() for h in handles))


async def bench_one(sc: Scenario, seed: int, timeout: float, speed: float) -> dict[str, Any]:
    env = await dev_server()
    meter = Meter()
    try:
        target = env.client.service_client.config.target_host
        client = await Client.connect(
            target,
            namespace=env.client.namespace,
            data_converter=pydantic_data_converter,
            interceptors=[meter],
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "fleet.db"
            SqliteFleet.create(path, get_preset(sc.preset), seed, speed).close()
            tq = f"cost-{uuid.uuid4().hex[:6]}"
            async with heartbeat(path), build_worker(client, path, tq):
                out = await sc.run(client, path, tq, timeout)
            calls = dict(meter.calls)
            sends = meter.heartbeat_sends()
            query_times = list(meter.times.get("queries (client)", []))
            beats_by_activity = dict(meter.beats_by_activity.most_common())
            await asyncio.sleep(1.0)  # visibility is eventually consistent
            tally = await read_histories(env.client)
            await noop_baseline(client)
            await asyncio.sleep(1.0)
            base = await read_histories(env.client, "WorkflowType = 'NoopHost'")
    finally:
        await env.shutdown()
    baseline = activations(base.task_seconds.get("NoopHost", []))
    tally.actions["queries (client)"] += len(query_times)
    tally.actions["activity heartbeats (sent, est.)"] += len(sends)
    tally.times.extend(query_times)
    tally.times.extend(sends)
    total = sum(tally.actions.values())
    per = max(1, out["visits"])
    top, mean = peak(tally.times)
    fleet_s = out["cycle_fleet_hours"] * 3600
    realtime = total / fleet_s if fleet_s > 0 else None
    return {
        "scenario": sc.name,
        "title": sc.title,
        "speed": speed,
        "activations": activations([t for ts in tally.task_seconds.values() for t in ts]),
        "activations_by_workflow_type": {
            wt: activations(ts) for wt, ts in sorted(tally.task_seconds.items())
        },
        "activations_noop_baseline": baseline,
        "per": sc.per,
        **out,
        "workflows": tally.workflows,
        "runs": tally.runs,
        "largest_run_events": tally.largest_run,
        "history_events": tally.events,
        "events_per": round(tally.events / per, 2),
        "actions": {k: tally.actions.get(k, 0) for k in KINDS},
        "actions_total": total,
        "actions_per": round(total / per, 3),
        "peak_actions_per_s": top,
        "mean_actions_per_s": round(mean, 1),
        "meta_600k_peak_actions_per_s": top * MEGA_TRAINS,
        "meta_600k_mean_actions_per_s": round(mean * MEGA_TRAINS, 1),
        "meta_600k_realtime_actions_per_s": (
            round(realtime * MEGA_TRAINS, 3) if realtime is not None else None
        ),
        "namespace_limit": NAMESPACE_LIMIT,
        "client_calls": calls,
        "heartbeats_by_activity": beats_by_activity,
        "actions_by_workflow_type": {
            wt: {"total": sum(c.values()), **dict(c.most_common())}
            for wt, c in sorted(tally.by_type.items(), key=lambda kv: -sum(kv[1].values()))
        },
        "runs_by_workflow_type": dict(tally.runs_by_type.most_common()),
        "events_by_workflow_type": dict(tally.events_by_type.most_common()),
        "activities_by_name": dict(tally.activities_by_name.most_common()),
        "info": dict(sorted(tally.info.items())),
    }


# --------------------------------------------------------------------------- output


def _p99_max(a: dict[str, float]) -> str:
    return f"{a['p99_s']:.3f}/{a['max_s']:.3f}"


def table(results: list[dict[str, Any]]) -> str:
    names = [r["scenario"] for r in results]
    w = 34
    col = 12

    def row(label: str, values: list[Any]) -> str:
        return f"{label:<{w}}" + "".join(f"{v!s:>{col}}" for v in values)

    lines = [row("", names), "-" * (w + col * len(names))]
    lines.append(row("state", [r["state"] + ("*" if r["timed_out"] else "") for r in results]))
    lines.append(row("wall s", [r["wall_s"] for r in results]))
    lines.append(row("visits (train) / changed (op)", [r["visits"] for r in results]))
    lines.append(row("workflows / runs", [f"{r['workflows']}/{r['runs']}" for r in results]))
    for kind in KINDS:
        lines.append(row("  " + kind, [r["actions"][kind] for r in results]))
    lines.append(row("billable actions", [r["actions_total"] for r in results]))
    lines.append(row("  per host visit / changed", [r["actions_per"] for r in results]))
    lines.append(row("history events", [r["history_events"] for r in results]))
    lines.append(row("  per host visit / changed", [r["events_per"] for r in results]))
    lines.append(row("largest run, events", [r["largest_run_events"] for r in results]))
    lines.append(row("timers cancelled", [r["info"].get("timers cancelled", 0) for r in results]))
    lines.append(
        row(
            "heartbeat calls",
            [r["client_calls"].get("activity heartbeats (calls)", 0) for r in results],
        )
    )
    lines.append(row("activation p99 / max, s", [_p99_max(r["activations"]) for r in results]))
    lines.append(
        row(
            "  no-op baseline p99 / max",
            [_p99_max(r["activations_noop_baseline"]) for r in results],
        )
    )
    lines.append(row("peak actions/s (1 s buckets)", [r["peak_actions_per_s"] for r in results]))
    lines.append(row("mean actions/s", [r["mean_actions_per_s"] for r in results]))
    lines.append(
        row(
            f"x{MEGA_TRAINS} (meta-600k) peak/s",
            [r["meta_600k_peak_actions_per_s"] for r in results],
        )
    )
    lines.append(
        row(
            f"x{MEGA_TRAINS} (meta-600k) real time/s",
            [r["meta_600k_realtime_actions_per_s"] for r in results],
        )
    )
    lines.append("")
    for r in results:
        verdict = "under" if r["meta_600k_peak_actions_per_s"] <= NAMESPACE_LIMIT else "OVER"
        lines.append(
            f"{r['scenario']}: {r['title']}: {r['actions_total']:,} actions, "
            f"{r['actions_per']} per {r['per']}; {MEGA_TRAINS} at its peak "
            f"{r['meta_600k_peak_actions_per_s']:,}/s, {verdict} the {NAMESPACE_LIMIT}/s "
            f"of a namespace (at {r['speed']:g}x; the real-time rate is the row above)"
        )
        if r["state"] not in ("stopped", "succeeded") or r["timed_out"]:
            lines.append(f"  ended {r['state']}: {r.get('reason', '')}")
        by_type = ", ".join(f"{wt} {c['total']}" for wt, c in r["actions_by_workflow_type"].items())
        lines.append(f"  actions by workflow type: {by_type}")
        acts = ", ".join(f"{k} {v}" for k, v in list(r["activities_by_name"].items())[:8])
        lines.append(f"  most scheduled activities: {acts}")
        children = r["actions"]["child workflow starts"]
        if children:
            lines.append(
                f"  per child workflow (domain or cluster, {children}): "
                f"{r['actions_total'] / children:.1f} actions, "
                f"{r['history_events'] / children:.1f} events"
            )
        timers = ", ".join(
            f"{wt} {c.get('timers started', 0)}/{r['info'].get(f'timers cancelled: {wt}', 0)}"
            for wt, c in r["actions_by_workflow_type"].items()
        )
        lines.append(f"  timers started/cancelled: {timers}")
        msgs = ", ".join(
            f"{k} {v}"
            for k, v in sorted(r["info"].items(), key=lambda kv: -kv[1])
            if k.startswith(("signal ", "update "))
        )
        lines.append(f"  messages: {msgs}")
    if any(r["timed_out"] for r in results):
        lines.append("* timed out: the train was asked to stop; figures are partial")
    return "\n".join(lines)


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for name in args.scenarios.split(","):
        sc = SCENARIOS[name.strip()]
        print(f"running {sc.name}: {sc.title} ...", file=sys.stderr, flush=True)
        r = await bench_one(sc, args.seed, args.timeout, parse_speed(args.speed))
        print(
            f"  {sc.name}: {r['state']} in {r['wall_s']} s, {r['actions_total']} actions",
            file=sys.stderr,
            flush=True,
        )
        out.append(r)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenarios", default="small,meta,cuda", help="comma-separated: small, meta, cuda"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--speed", default="3600", help="fleet seconds per wall second, or 'max' (default 3600)"
    )
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds per scenario before it is stopped"
    )
    parser.add_argument(
        "--cuda-max-failures",
        type=int,
        default=None,
        help="the CUDA operation's max_failures (default: none, the bad-build rule decides; "
        "examples/cuda.yaml says 3, which stops it at its first wave on meta-24k)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    CUDA_MAX_FAILURES[0] = args.cuda_max_failures
    for name in args.scenarios.split(","):
        if name.strip() not in SCENARIOS:
            parser.error(f"--scenarios: unknown {name!r} (small, meta, cuda)")
    stdout = os.dup(1)
    os.dup2(2, 1)  # the dev server prints its banner on the stdout it inherits: keep ours clean
    try:
        results = asyncio.run(bench(args))
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
    if args.json:
        print(json.dumps({"scenarios": results}))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
