"""The fleet store under real trains: SQLite beside PostgreSQL for one cycle, and one worker
beside three on one PostgreSQL record of ``meta-600k`` (issue 30's benchmark).

1. **One ``meta-24k`` cycle at ``--speed max``** on each store: a dev server (started here), a
   fleet of seed 1, one ``trainctl worker`` process, one train of domain 92 at a 3% budget (the
   spec ``bench_temporal_cost``'s ``meta`` scenario runs) until its cycle completes. Printed side
   by side: the wall time, and the record's writes per host visit (write statements, rows
   written and write transactions, counted in the worker by ``store_counter``); the ratio of
   PostgreSQL's wall time to SQLite's (the goal: within 1.5x).
2. **``meta-600k``, one worker and three** (PostgreSQL; the workers are processes, each with its
   own ``TRAINCTL_HOME``, as on three machines): 25 trains, one per cluster, started at once on
   a fresh copy of one fleet; a whole cycle (76,800 visits) takes far too long on a 2-core
   machine, so the figures are those of a **window** of ``--window`` seconds from the moment
   every train has started: hosts visited per second and writes per visit.

A host visit is a host the record shows returned to service after its verification passed
(``host_state`` verifying -> in_service): the same count on every store and worker count.

    nice python benchmarks/bench_store_cycle.py                    # both parts, ~12 min (2 cores)
    nice python benchmarks/bench_store_cycle.py --parts cycle --cycle-preset small   # ~1 min
    nice python benchmarks/bench_store_cycle.py --pg postgresql://USER@HOST:PORT/postgres

Without ``--pg`` the PostgreSQL is a throwaway cluster in a temporary directory (Debian's
server binaries, ``tests/pg_helpers``: fsync off, as SQLite's WAL at ``synchronous=NORMAL``
skips an fsync per commit); with it, databases are made (and dropped) on that server, whose
user must be allowed to CREATE DATABASE (its password from PGPASSWORD or a .pgpass). Outside
CI; a measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from temporalio.client import Client

from orchestrator.app.demo import demo_spec
from orchestrator.fleet import SqliteFleet, open_backend
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.fleet.store_url import STORE_ENV, driver_url
from orchestrator.train.client import start_train, train_result

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import store_counter  # noqa: E402
from dev_server import dev_server  # noqa: E402

DOMAIN, BUDGET = 92, "3%"  # bench_temporal_cost's meta scenario
_WORKER = (
    "import sys; sys.path.insert(0, {bench!r}); import store_counter; "
    "store_counter.install({out!r}); "
    "from orchestrator.app.cli import entrypoint; entrypoint()"
)


# ------------------------------------------------------------------------- PostgreSQL
class Postgres:
    """Where the benchmark's PostgreSQL databases are made: a server given by URL (its
    maintenance database), or a throwaway cluster of Debian's binaries."""

    def __init__(self, admin_url: str | None) -> None:
        self.server: Any = None
        if admin_url is None:
            sys.path.insert(0, str(ROOT))
            from tests.pg_helpers import PASSWORD, start_server

            self.server = start_server()
            os.environ["PGPASSWORD"] = PASSWORD
            admin_url = self.server.url("postgres")
        self.admin_url = admin_url
        self.engine = create_engine(driver_url(admin_url), isolation_level="AUTOCOMMIT")
        self.made: list[str] = []

    def url(self, db: str) -> str:
        head, _, _ = self.admin_url.rpartition("/")
        return f"{head}/{db}"

    def new_database(self, template: str | None = None) -> str:
        name = f"bench_{uuid.uuid4().hex[:10]}"
        like = f' TEMPLATE "{template}"' if template else ""
        with self.engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"{like}'))
        self.made.append(name)
        return name

    def close(self) -> None:
        with self.engine.connect() as conn:
            for name in self.made:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.engine.dispose()
        if self.server is not None:
            from tests.pg_helpers import remove_server

            remove_server(self.server)

    def describe(self) -> str:
        with self.engine.connect() as conn:
            version = str(conn.execute(text("SHOW server_version")).scalar()).split()[0]
        where = "at --pg" if self.server is None else "a throwaway cluster on loopback, fsync off"
        return f"PostgreSQL {version}, {where}"


# ---------------------------------------------------------------------------- workers
@contextlib.contextmanager
def workers(n: int, address: str, store: str, queue: str, tmp: Path) -> Iterator[list[Path]]:
    """``n`` worker processes of this tree on ``store``, each its own home; their counter
    files."""
    procs, outs = [], []
    log = (tmp / "workers.log").open("ab")
    try:
        for _ in range(n):
            home = tmp / f"home-{uuid.uuid4().hex[:6]}"
            home.mkdir()
            out = home / "writes.json"
            code = _WORKER.format(bench=str(BENCH), out=str(out))
            cmd = [sys.executable, "-c", code, "worker", "--task-queue", queue]
            cmd += ["--address", address, "--metrics-port", "0"]
            env = {**os.environ, "TRAINCTL_HOME": str(home), STORE_ENV: store}
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log))
            outs.append(out)
        yield outs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()


def visits(store: str | Path, since: int = 0) -> tuple[int, int]:
    """(host visits the record shows after ``since``, the last seq)."""
    fleet = open_backend(store)
    try:
        n, last = 0, since
        for seq, ev, _ in fleet.records(since=since):
            last = seq
            d = ev.detail
            if ev.kind == "host_state" and (d.get("before"), d.get("after")) == (
                "verifying",
                "in_service",
            ):
                n += 1
        return n, last
    finally:
        fleet.close()


def per(counts: dict[str, int], n: int) -> dict[str, float]:
    keys = ("write_statements", "rows_written", "write_transactions")
    return {k: counts[k] / max(1, n) for k in keys}


# ------------------------------------------------------------------------ part 1: cycle
async def cycle(store: str | Path, preset: str, tmp: Path) -> dict[str, Any]:
    """One train cycle of ``preset``'s c00 on ``store`` with one worker process."""
    SqliteFleet.create(store, get_preset(preset), 1, MAX_SPEED).close()
    _, start_seq = visits(store)
    env = await dev_server()
    try:
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        address = env.client.service_client.config.target_host
        with workers(1, address, str(store), queue, tmp) as outs:
            spec = demo_spec(preset, DOMAIN, BUDGET, until_cycle=True)
            t0 = time.perf_counter()
            await start_train(env.client, spec, task_queue=queue)
            status = await train_result(env.client, spec.cluster)
            wall = time.perf_counter() - t0
        counts = store_counter.read(outs)  # dumped at the worker's exit
    finally:
        await env.shutdown()
    n, _ = visits(store, start_seq)
    return {
        "state": status.state,
        "wall_s": wall,
        "visits": n,
        "train_visited": status.hosts_visited_this_cycle,
        "hosts": status.hosts_total,
        "counts": counts,
        "per_visit": per(counts, n),
    }


def print_cycle(preset: str, sq: dict[str, Any], pg: dict[str, Any], where: str) -> None:
    print(f"\n1. one {preset} cycle at --speed max: 1 train (domain {DOMAIN}, {BUDGET}), 1 worker")
    print(f"   PostgreSQL: {where}; SQLite: a file in a temporary directory (WAL)")
    w = 36
    print(f"   {'':<{w}}{'SQLite':>12}{'PostgreSQL':>12}{'PG / SQLite':>13}")

    def row(label: str, a: float, b: float, fmt: str = ".2f") -> None:
        ratio = b / a if a else float("nan")
        print(f"   {label:<{w}}{a:>12{fmt}}{b:>12{fmt}}{ratio:>12.2f}x")

    row("wall time, s", sq["wall_s"], pg["wall_s"], ".1f")
    row("host visits (record)", sq["visits"], pg["visits"], ".0f")
    for key, label in (
        ("write_statements", "write statements per visit"),
        ("rows_written", "rows written per visit"),
        ("write_transactions", "write transactions per visit"),
    ):
        row(label, sq["per_visit"][key], pg["per_visit"][key])
    row("visits per second", sq["visits"] / sq["wall_s"], pg["visits"] / pg["wall_s"])
    for name, r in (("SQLite", sq), ("PostgreSQL", pg)):
        print(
            f"   {name}: train {r['state']}, visited {r['train_visited']} of {r['hosts']} "
            f"(the train's count), writes {r['counts']}"
        )
    ratio = pg["wall_s"] / sq["wall_s"]
    verdict = "met" if ratio <= 1.5 else "NOT met"
    print(f"   goal PostgreSQL wall within 1.5x of SQLite: {ratio:.2f}x, {verdict}")


# ----------------------------------------------------------------------- part 2: window
async def window(
    pg: Postgres, template: str, n_workers: int, seconds: float, tmp: Path
) -> dict[str, Any]:
    """25 trains of meta-600k on a fresh copy of ``template`` with ``n_workers`` workers, for
    ``seconds`` from the moment all have started."""
    store = pg.url(pg.new_database(template))
    _, start_seq = visits(store)
    env = await dev_server()
    try:
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        address = env.client.service_client.config.target_host
        client: Client = env.client
        with workers(n_workers, address, store, queue, tmp) as outs:
            clusters = get_preset("meta-600k").cluster_names()
            t_start = time.perf_counter()
            for c in clusters:
                spec = demo_spec("meta-600k", DOMAIN, BUDGET, until_cycle=True, cluster=c)
                await start_train(client, spec, task_queue=queue)
            started = time.perf_counter()
            before = store_counter.read(outs)
            v0, seq0 = visits(store, start_seq)
            await asyncio.sleep(seconds)
            after = store_counter.read(outs)
            v1, _ = visits(store, seq0)
            measured = time.perf_counter() - started
            for c in clusters:  # the workers stop next: nothing may keep running on the server
                with contextlib.suppress(Exception):
                    await client.get_workflow_handle(f"train-{c}").terminate("window over")
    finally:
        await env.shutdown()
    counts = {k: after[k] - before[k] for k in after}
    return {
        "workers": n_workers,
        "start_s": started - t_start,
        "window_s": measured,
        "visits_before": v0,
        "visits": v1,
        "visits_per_s": v1 / measured,
        "counts": counts,
        "per_visit": per(counts, v1),
    }


def print_window(runs: list[dict[str, Any]], seconds: float, build_s: float) -> None:
    print(
        f"\n2. meta-600k on PostgreSQL, 25 trains (domain {DOMAIN}, {BUDGET}) at --speed max: "
        f"a WINDOW of {seconds:.0f} s from the moment all 25 had started, not a whole cycle "
        "(76,800 visits)"
    )
    print(f"   fleet built in {build_s:.1f} s; each run on a fresh copy (CREATE DATABASE TEMPLATE)")
    w = 36
    print(f"   {'':<{w}}" + "".join(f"{str(r['workers']) + ' worker(s)':>14}" for r in runs))

    def row(label: str, values: list[float], fmt: str = ".2f") -> None:
        print(f"   {label:<{w}}" + "".join(f"{v:>14{fmt}}" for v in values))

    row("starting 25 trains, s", [r["start_s"] for r in runs], ".1f")
    row("window, s", [r["window_s"] for r in runs], ".1f")
    row("host visits in the window", [r["visits"] for r in runs], ".0f")
    row("hosts visited per second", [r["visits_per_s"] for r in runs])
    for key, label in (
        ("write_statements", "write statements per visit"),
        ("rows_written", "rows written per visit"),
        ("write_transactions", "write transactions per visit"),
    ):
        row(label, [r["per_visit"][key] for r in runs])
    tx_rate = [r["counts"]["write_transactions"] / r["window_s"] for r in runs]
    row("write transactions per second", tx_rate, ".1f")
    if len(runs) > 1 and runs[0]["visits_per_s"]:
        gain = runs[-1]["visits_per_s"] / runs[0]["visits_per_s"]
        print(
            f"   {runs[-1]['workers']} workers / {runs[0]['workers']}, hosts visited per "
            f"second: {gain:.2f}x"
        )


# -------------------------------------------------------------------------------- main
async def bench(args: argparse.Namespace) -> None:
    pg = Postgres(args.pg)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp_dir:
            tmp = Path(tmp_dir)
            if "cycle" in args.parts:
                print(f"cycle on SQLite ({args.cycle_preset}) ...", file=sys.stderr, flush=True)
                sq = await cycle(tmp / "fleet.db", args.cycle_preset, tmp)
                print(f"cycle on PostgreSQL ({args.cycle_preset}) ...", file=sys.stderr, flush=True)
                pgr = await cycle(pg.url(pg.new_database()), args.cycle_preset, tmp)
                print_cycle(args.cycle_preset, sq, pgr, pg.describe())
                sys.stdout.flush()
            if "window" in args.parts:
                print("building meta-600k on PostgreSQL ...", file=sys.stderr, flush=True)
                template = pg.new_database()
                t0 = time.perf_counter()
                SqliteFleet.create(pg.url(template), get_preset("meta-600k"), 1, MAX_SPEED).close()
                build_s = time.perf_counter() - t0
                runs = []
                for n in args.workers:
                    print(f"meta-600k window, {n} worker(s) ...", file=sys.stderr, flush=True)
                    runs.append(await window(pg, template, n, args.window, tmp))
                print_window(runs, args.window, build_s)
    finally:
        pg.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="cycle,window", help="cycle, window or both")
    parser.add_argument("--cycle-preset", default="meta-24k")
    parser.add_argument("--window", type=float, default=120.0, help="seconds (meta-600k)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--pg", help="a PostgreSQL server's maintenance database URL")
    args = parser.parse_args()
    stdout = os.dup(1)
    os.dup2(2, 1)  # the dev server prints its banner on the stdout it inherits: keep ours clean
    try:
        sys.stdout = os.fdopen(os.dup(stdout), "w", buffering=1)
        asyncio.run(bench(args))
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)


if __name__ == "__main__":
    main()
