"""A train on every cluster of ``meta-600k`` at ``--speed max`` on one worker (issue 27's goal:
a whole cycle, 76,800 host visits, in at most 10 minutes, the worker at most 300 MB).

One dev server and one worker of the product's default concurrency (in this process, so the
RSS printed is the worker's process), 25 trains started at once, each running one cycle of
``bench_train``'s spec. Every ``--every`` seconds it reads each train's ``status`` and prints
hosts visited so far, the rate, and the process's resident memory; it stops when every train
completed its cycle or at ``--cap`` seconds, and prints the wall time of the cycle (or its
projection at the rate reached, marked so) beside the goals. Then it reads every history
back from the server (``temporal_tally``) and prints the billable actions of the run, per host
visit, and their peak and mean per second: the 25 trains of ``meta-600k`` measured against
the 500 actions/s a Temporal Cloud namespace is allowed by default. Outside CI.

    nice python benchmarks/bench_fleet_trains.py [--preset meta-600k] [--domain-size 92]
        [--cap 600] [--every 15]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from orchestrator.app.worker import build_worker
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED

sys.path.insert(0, str(Path(__file__).parent))
from bench_train import one_cycle_spec  # noqa: E402
from dev_server import dev_server  # noqa: E402
from temporal_tally import peak as top_rate  # noqa: E402
from temporal_tally import read_histories  # noqa: E402

GOAL_WALL_SECONDS = 600.0
GOAL_RSS_MB = 300.0
NAMESPACE_LIMIT = 500  # actions per second a Temporal Cloud namespace is allowed by default


def rss_mb() -> float:
    """This process's resident set now, in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


async def visited(client: Client, ids: list[str]) -> tuple[int, int]:
    """(hosts visited this cycle over every train, trains done)."""
    total = done = 0
    for wf in ids:
        st = await client.get_workflow_handle(wf).query("status", result_type=TrainStatus)
        total += st.hosts_visited_this_cycle
        done += st.cycles_completed >= 1 or st.state in ("stopped", "halted")
    return total, done


async def run(preset: str, domain_size: int, cap: float, every: float) -> None:
    shape = get_preset(preset)
    env = await dev_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "fleet.db"
            t0 = time.perf_counter()
            SqliteFleet.create(path, shape, 1, MAX_SPEED).close()
            hosts = shape.clusters * shape.hosts_per_cluster
            print(f"{preset}: {hosts:,} hosts, fleet built in {time.perf_counter() - t0:.0f} s")
            from workflows.cluster_train import ClusterTrain

            tq = f"bench-{uuid.uuid4().hex[:6]}"
            clusters = [f"c{i:02d}" for i in range(shape.clusters)]
            ids = [f"train-{c}-{tq}" for c in clusters]
            peak_rss = rss_mb()
            async with build_worker(env.client, path, tq):
                start = time.perf_counter()
                for c, wf in zip(clusters, ids, strict=True):
                    await env.client.start_workflow(
                        ClusterTrain.run,
                        TrainInput(spec=one_cycle_spec(c, domain_size)),
                        id=wf,
                        task_queue=tq,
                    )
                wall = 0.0
                seen, done, last = 0, 0, (0.0, 0)  # last: (wall, visits) of the reading before
                while done < len(ids) and time.perf_counter() - start < cap:
                    await asyncio.sleep(every)
                    if seen:
                        last = (wall, seen)
                    seen, done = await visited(env.client, ids)
                    peak_rss = max(peak_rss, rss_mb())
                    wall = time.perf_counter() - start
                    print(
                        f"  {wall:6.0f} s  {seen:>7,} visits  {seen / wall:6.1f} hosts/s  "
                        f"{done}/{len(ids)} trains done  rss {rss_mb():.0f} MB",
                        flush=True,
                    )
                wall = time.perf_counter() - start
                if done < len(ids):  # the cap came first: what still runs stops here
                    for wf in ids:
                        with contextlib.suppress(RPCError):  # those that completed
                            await env.client.get_workflow_handle(wf).terminate("benchmark over")
            await asyncio.sleep(1.0)  # visibility is eventually consistent
            tally = await read_histories(env.client)
    finally:
        await env.shutdown()
    rate = seen / wall if wall else 0.0
    # The rate falls as the run goes on: the rest of the cycle goes at the latest one.
    latest = (seen - last[1]) / (wall - last[0]) if wall > last[0] and last[1] else rate
    whole = done == len(ids)
    left = (hosts - seen) / latest if latest else float("inf")
    cycle = wall if whole else wall + left
    print(f"{'measure':<44} {'value':>12} {'goal':>10}")
    label = f"hosts/s, {len(ids)} trains on one worker"
    print(f"{label:<44} {rate:>12.1f} {hosts / GOAL_WALL_SECONDS:>10.1f}")
    print(f"{'hosts/s between the last two readings':<44} {latest:>12.1f}")
    print(f"{'whole-cycle wall, s':<44} {cycle:>12.0f} {GOAL_WALL_SECONDS:>10.0f}")
    if not whole:
        print(f"  (projected: {seen:,} visits in {wall:.0f} s, the rest at the latest rate)")
    print(f"{'worker process peak RSS, MB':<44} {peak_rss:>12.0f} {GOAL_RSS_MB:>10.0f}")
    actions = sum(tally.actions.values())
    top, mean = top_rate(tally.times)
    print(f"{'billable actions (histories read back)':<44} {actions:>12,}")
    print(f"{'  per host visit':<44} {actions / max(1, seen):>12.3f}")
    print(f"{'  history events per host visit':<44} {tally.events / max(1, seen):>12.2f}")
    print(f"{'peak actions/s (1 s buckets), all trains':<44} {top:>12} {NAMESPACE_LIMIT:>10}")
    print(f"{'mean actions/s':<44} {mean:>12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="meta-600k")
    parser.add_argument("--domain-size", type=int, default=92)
    parser.add_argument("--cap", type=float, default=GOAL_WALL_SECONDS, help="seconds at most")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between readings")
    args = parser.parse_args()
    asyncio.run(run(args.preset, args.domain_size, args.cap, args.every))


if __name__ == "__main__":
    main()
