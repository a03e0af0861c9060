"""Orchestration throughput of the maintenance train against the raw rate of the same server.

Baseline: a no-op workflow per host running eight no-op activities in sequence (what a naive
per-host pipeline of cordon, drain, five updates and return would cost in Temporal alone), every
host's workflow started at once on a worker of the SDK's default concurrency. Ours: one full
visit cycle of a real train on a ``max``-speed fleet (the fastest scaled speed: fleet-time
waits take next to no wall time), so what remains is orchestration. Both run on one dev server
started by this script, in the same run; the ratio is what to read.

    python benchmarks/bench_train.py [--preset small|meta-24k] [--domain-size N] [--no-repeat]

The train runs twice, with the worker's ``max_concurrent_activities`` at 8 (the product's) and
at 1, and the figures of both runs are printed (live runs need not repeat exactly: every host is
visited or quarantined in both).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orchestrator.app.worker import build_worker
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED

sys.path.insert(0, str(Path(__file__).parent))
from dev_server import dev_server  # noqa: E402
from noop_workflow import NoopHost, noop  # noqa: E402


async def baseline(env: WorkflowEnvironment, hosts: int) -> float:
    """Hosts per second for the no-op pipeline: every host's workflow started at once, on a
    worker with the SDK's default concurrency (issue 27's baseline)."""
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    with ThreadPoolExecutor(max_workers=16) as pool:
        async with Worker(
            env.client,
            task_queue=tq,
            workflows=[NoopHost],
            activities=[noop],
            activity_executor=pool,
        ):
            start = time.perf_counter()
            handles = [
                await env.client.start_workflow(
                    NoopHost.run, f"h{i}", id=f"noop-{tq}-{i}", task_queue=tq
                )
                for i in range(hosts)
            ]
            waiting = asyncio.Semaphore(64)  # result long-polls: under the server's poller cap

            async def done(handle: WorkflowHandle[Any, Any]) -> None:
                async with waiting:
                    await handle.result()

            await asyncio.gather(*(done(h) for h in handles))
            return hosts / (time.perf_counter() - start)


def one_cycle_spec(cluster: str, domain_size: int) -> TrainSpec:
    """One cycle of an OS and BIOS update over ``cluster``, never halting on failures: what
    every train of these benchmarks runs."""
    return TrainSpec.model_validate(
        {
            "cluster": cluster,
            "domain_size": domain_size,
            "budget": {"max_unavailable": domain_size + 16},
            "targets": {"os": "6.8.0-45", "bios": "3.2"},
            "stop_after_cycles": 1,
            "halt_after_failures": 10_000,
            "halt_failure_rate": 1.0,
        }
    )


async def train_run(
    env: WorkflowEnvironment, preset: str, domain_size: int, concurrency: int = 8
) -> tuple[float, dict[str, float]]:
    """Hosts per second of one full train cycle on a max-speed fleet, and its figures."""
    from workflows.cluster_train import ClusterTrain

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.db"
        SqliteFleet.create(path, get_preset(preset), 1, MAX_SPEED).close()
        spec = one_cycle_spec("c00", domain_size)
        tq = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(env.client, path, tq, concurrency):
            start = time.perf_counter()
            status = await env.client.execute_workflow(
                ClusterTrain.run, TrainInput(spec=spec), id=f"train-bench-{tq}", task_queue=tq
            )
            wall = time.perf_counter() - start
    figures = {
        "hosts_visited": status.hosts_visited_this_cycle,
        "hosts_quarantined": status.quarantined + status.in_repair,
        "job_interruptions": status.jobs_interrupted,
        "lost_gpu_hours": status.lost_gpu_hours,
    }
    return status.hosts_total / wall, figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--domain-size", type=int, default=32)
    parser.add_argument(
        "--no-repeat", action="store_true", help="skip the second train run (concurrency 1)"
    )
    args = parser.parse_args()
    env = await dev_server()
    try:
        hosts = get_preset(args.preset).hosts_per_cluster
        ours, figures = await train_run(env, args.preset, args.domain_size)
        print(f"train: {ours:.1f} hosts/s, figures {figures}", flush=True)
        base = await baseline(env, hosts)
        print(f"baseline: {base:.1f} hosts/s", flush=True)
        again = None
        if not args.no_repeat:
            _, again = await train_run(env, args.preset, args.domain_size, concurrency=1)
    finally:
        await env.shutdown()
    print(f"{'measure':<60} {'hosts/s':>9}")
    print(f"{'no-op workflow per host, 8 activities, all at once (baseline)':<60} {base:>9.1f}")
    label = f"train cycle, {args.preset} ({hosts} hosts), domain {args.domain_size}"
    print(f"{label:<60} {ours:>9.1f}")
    print(f"{'ratio train / baseline':<60} {ours / base:>9.2f}")
    print(f"figures, max_concurrent_activities 8: {figures}")
    if again is not None:
        print(f"figures, max_concurrent_activities 1: {again}")


if __name__ == "__main__":
    asyncio.run(main())
