"""Do operation plans hold? Seeded operations on ``multi``, each planned then run.

Each seed builds a ``multi`` fleet at speed 1 on the time-skipping server's clock, plans a CUDA
upgrade of zone z00 of every cluster as ``ops plan`` does (``plan_scope``), runs it
(``BulkOperation``) and compares, cluster by cluster (one cluster operation each), the jobs it
interrupted with the plan's range and its waves with the plan's. Prints one line a cluster
operation and a summary: how many counts fell in their range, the range midpoints' mean
absolute error (as a share of the mean count), and how many wave counts were equal, among them
those of the operations where nothing happened that the plan could not know (a host failed, a
job refused that the plan did not expect to, outages took a wave's room: the run re-plans then,
and says why).

    PYTHONPATH=$PWD python benchmarks/bench_ops_plan_holds.py --seeds 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.ops_types import OperationInput, OperationStatus
from orchestrator.contracts.paths import TRAINCTL_HOME_ENV, temporal_test_server_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.execution.ops_take import plan_scope
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.ops import parse_spec_text
from workflows.bulk_operation import BulkOperation

CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}


@dataclass(frozen=True)
class Outcome:
    seed: int
    cluster: str
    interrupted: int
    low: int
    high: int
    waves_planned: int
    waves_run: int
    replans: list[str]
    #: hosts of the run that failed (quarantined, lost to repair, failed verification)
    failed: int = 0
    #: hosts handed back by refusing jobs, and those the plan expected to be
    requeued: int = 0
    asked: int = 0

    @property
    def unplanned(self) -> bool:
        """Something the plan could not know happened: a host failed, a job refused that the
        plan did not expect to, or outages took room a wave needed."""
        room = any("room ran out" in r for r in self.replans)
        return bool(self.failed) or self.requeued > self.asked or room

    @property
    def inside(self) -> bool:
        return self.low <= self.interrupted <= self.high


async def time_skipping() -> WorkflowEnvironment:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server_path()),
        data_converter=pydantic_data_converter,
        test_server_startup_timeout=timedelta(seconds=60),
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in SEARCH_ATTRIBUTES
            },
        )
    )
    return env


def spec_for(seed: int) -> dict[str, object]:
    return {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "c0*", "zones": ["z00"]},
        "targets": CUDA,
        "budget": {"max_unavailable": "25%"},
        "drain": {"max_wait": "2h"},
        "max_failures": 64,
        "request_id": f"holds-{seed}-{uuid.uuid4().hex[:6]}",
    }


async def run_seed(
    env: WorkflowEnvironment, home: Path, seed: int, queue: str = "holds"
) -> list[Outcome]:
    """Plan and run one seed's operation; one outcome per cluster."""
    now = await env.get_current_time()
    path = home / f"fleet-{seed}.db"
    SqliteFleet.create(path, get_preset("multi"), seed, 1.0, wall=now).close()
    spec = parse_spec_text(json.dumps(spec_for(seed)))
    fleet = SqliteFleet(path)
    try:
        plan = plan_scope(fleet, spec, now).plan
    finally:
        fleet.close()
    queue = f"{queue}-{seed}-{uuid.uuid4().hex[:8]}"
    async with build_worker(env.client, path, queue):
        handle = await env.client.start_workflow(
            BulkOperation.run, OperationInput(spec=spec), id=spec.operation_id, task_queue=queue
        )
        try:
            status = await handle.result()
        except WorkflowFailureError as err:
            status = OperationStatus.model_validate(err.cause.details[0])  # type: ignore[attr-defined]
        for cluster in status.clusters:
            with contextlib.suppress(RPCError):
                await env.client.get_workflow_handle(arbiter_workflow_id(cluster, queue)).terminate(
                    "benchmark done"
                )
    planned = {c.cluster: c for c in plan.clusters}
    return [
        Outcome(
            seed,
            name,
            p.jobs_interrupted,
            planned[name].jobs_interrupted_range[0],
            planned[name].jobs_interrupted_range[1],
            planned[name].waves,
            p.waves_done,
            list(p.replans),
            p.hosts_quarantined + len(p.lost_to_repair) + p.failures,
            p.hosts_requeued,
            sum(len(w.asked) for w in plan.waves if w.cluster == name),
        )
        for name, p in sorted(status.clusters.items())
    ]


def summary(outcomes: list[Outcome], seconds: float) -> str:
    mean = sum(o.interrupted for o in outcomes) / len(outcomes)
    mae = sum(abs((o.low + o.high) / 2 - o.interrupted) for o in outcomes) / len(outcomes)
    equal = sum(o.waves_planned == o.waves_run for o in outcomes)
    sound = [o for o in outcomes if not o.unplanned]
    equal_sound = sum(o.waves_planned == o.waves_run for o in sound)
    inside = sum(o.inside for o in outcomes)
    return (
        f"{len(outcomes)} cluster operations: {inside} interruption counts in their range; "
        f"midpoints' mean absolute error {mae:.2f} jobs = {mae / max(mean, 1e-9):.0%} of the "
        f"mean count {mean:.2f}; wave counts equal {equal}/{len(outcomes)} "
        f"({equal_sound}/{len(sound)} where nothing unplanned happened); {seconds:.0f} s"
    )


def mae_share(outcomes: list[Outcome]) -> float:
    """The range midpoints' mean absolute error as a share of the mean interruption count."""
    mean = sum(o.interrupted for o in outcomes) / len(outcomes)
    mae = sum(abs((o.low + o.high) / 2 - o.interrupted) for o in outcomes) / len(outcomes)
    return mae / max(mean, 1e-9)


async def run_seeds(
    env: WorkflowEnvironment, home: Path, seeds: int, queue: str = "holds", show: bool = False
) -> list[Outcome]:
    """Seeds 1..``seeds`` one after the other (the time-skipping server stalls on operations
    side by side), fleets ``home/fleet-<seed>.db``, task queues named from ``queue``; ``show``
    prints each outcome as it comes."""
    outcomes = []
    for seed in range(1, seeds + 1):
        for o in await run_seed(env, home, seed, queue):
            outcomes.append(o)
            if show:
                print(line(o), flush=True)
    return outcomes


def line(o: Outcome) -> str:
    return (
        f"seed {o.seed} {o.cluster}: interrupted {o.interrupted}, plan "
        f"{o.low}-{o.high}{'' if o.inside else ' OUTSIDE'}; waves planned "
        f"{o.waves_planned}, run {o.waves_run}; {o.failed} hosts failed, {o.requeued} handed "
        f"back ({o.asked} planned); {'; '.join(o.replans)}"
    )


async def main(seeds: int) -> None:
    env = await time_skipping()
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[TRAINCTL_HOME_ENV] = tmp
        try:
            outcomes = await run_seeds(env, Path(tmp), seeds, show=True)
        finally:
            await env.shutdown()
    print(summary(outcomes, time.monotonic() - start))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds (4 cluster operations each)")
    asyncio.run(main(parser.parse_args().seeds))
