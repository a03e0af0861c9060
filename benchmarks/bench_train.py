"""Orchestration throughput of the maintenance train against the raw rate of the same server.

Baseline: a no-op workflow per host running eight no-op activities in sequence (what a naive
per-host pipeline of cordon, drain, five updates and return would cost in Temporal alone), with
as many hosts in flight as the train's domain size. Ours: one full visit cycle of a real train on
a ``max``-speed fleet (every fleet-time wait is zero), so what remains is orchestration. Both run
on one dev server started by this script, in the same run; the ratio is what to read.

    python benchmarks/bench_train.py [--preset small|meta-24k] [--domain-size N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orchestrator.app.worker import build_worker
from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED

sys.path.insert(0, str(Path(__file__).parent))
from noop_workflow import NoopHost, noop  # noqa: E402


async def baseline(env: WorkflowEnvironment, hosts: int, parallel: int) -> float:
    """Hosts per second for the no-op pipeline, ``parallel`` hosts at a time."""
    from concurrent.futures import ThreadPoolExecutor

    tq = f"bench-{uuid.uuid4().hex[:6]}"
    sem = asyncio.Semaphore(parallel)

    async def one(i: int) -> None:
        async with sem:
            await env.client.execute_workflow(
                NoopHost.run, f"h{i}", id=f"noop-{tq}-{i}", task_queue=tq
            )

    async with Worker(
        env.client,
        task_queue=tq,
        workflows=[NoopHost],
        activities=[noop],
        activity_executor=ThreadPoolExecutor(8),
        max_concurrent_activities=8,
    ):
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(hosts)))
        return hosts / (time.perf_counter() - start)


async def train_rate(env: WorkflowEnvironment, preset: str, domain_size: int) -> tuple[float, int]:
    """Hosts per second of one full train cycle on a max-speed fleet."""
    from workflows.cluster_train import ClusterTrain

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.db"
        SqliteFleet.create(path, get_preset(preset), 1, MAX_SPEED).close()
        spec = TrainSpec.model_validate(
            {
                "cluster": "c00",
                "domain_size": domain_size,
                "budget": {"max_unavailable": domain_size + 16},
                "targets": {"os": "6.8.0-45", "bios": "3.2"},
                "stop_after_cycles": 1,
                "halt_after_failures": 10_000,
                "halt_failure_rate": 1.0,
            }
        )
        tq = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(env.client, path, tq):
            start = time.perf_counter()
            status = await env.client.execute_workflow(
                ClusterTrain.run, TrainInput(spec=spec), id=f"train-bench-{tq}", task_queue=tq
            )
            wall = time.perf_counter() - start
    return status.hosts_total / wall, status.hosts_total


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--domain-size", type=int, default=32)
    args = parser.parse_args()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_startup_timeout=timedelta(seconds=60),
    )
    try:
        ours, hosts = await train_rate(env, args.preset, args.domain_size)
        base = await baseline(env, min(hosts, 512), args.domain_size)
    finally:
        await env.shutdown()
    print(f"{'measure':<52} {'hosts/s':>9}")
    print(f"{'no-op workflow, 8 activities per host (baseline)':<52} {base:>9.1f}")
    label = f"train cycle, {args.preset} ({hosts} hosts), domain {args.domain_size}"
    print(f"{label:<52} {ours:>9.1f}")
    print(f"{'ratio train / baseline':<52} {ours / base:>9.2f}")


if __name__ == "__main__":
    asyncio.run(main())
