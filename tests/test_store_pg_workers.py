"""Three workers, each with a TRAINCTL_HOME of its own (nothing shared but the Temporal address
and the store URL, as on three machines), run trains on three clusters of ``multi`` from one
PostgreSQL record; one worker is SIGKILLed while its hosts drain and PostgreSQL restarts once.
Everything finishes, the audit passes, and the record shows no host with two owners and no
instant over the budget. Real PostgreSQL, real Temporal dev server, real worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from temporalio.service import RPCError

from orchestrator.app.cli import main
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.fleet import open_backend
from orchestrator.fleet.store_url import STORE_ENV
from tests.pg_helpers import PgServer
from tests.train_helpers import spec
from workflows.cluster_train import ClusterTrain

REPO = Path(__file__).resolve().parent.parent
CLUSTERS = ("c00", "c01", "c02")


def _worker(
    env: Any, home: Path, store: str, task_queue: str, log: Path
) -> subprocess.Popen[bytes]:
    home.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", "from orchestrator.app.cli import entrypoint; entrypoint()"]
    cmd += ["worker", "--task-queue", task_queue, "--metrics-port", "0"]
    cmd += ["--address", env.client.service_client.config.target_host]
    env_vars = {**os.environ, "TRAINCTL_HOME": str(home), STORE_ENV: store}
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env_vars, stdout=out, stderr=out)


def _record_holds(store: str) -> tuple[int, dict[str, int]]:
    """(cordons, the most hosts held at once per cluster), asserting no host is taken while
    another owner holds it and no cordon leaves more held than the budget it was checked
    against (its ``limit``)."""
    fleet = open_backend(store)
    try:
        held: dict[str, dict[str, str]] = {}
        most: dict[str, int] = {}
        cordons = 0
        for _, ev, cluster in fleet.records():
            if ev.kind != "host_state" or ev.host is None:
                continue
            mine = held.setdefault(cluster, {})
            if ev.detail["after"] == "cordoned" and ev.detail.get("owner"):
                assert ev.host not in mine, f"{ev.host}: {mine[ev.host]} and {ev.detail['owner']}"
                mine[ev.host] = str(ev.detail["owner"])
                cordons += 1
                assert len(mine) <= int(ev.detail["limit"]), (cluster, sorted(mine))
            elif ev.detail["after"] == "in_service":
                mine.pop(ev.host, None)
            most[cluster] = max(most.get(cluster, 0), len(mine))
        return cordons, most
    finally:
        fleet.close()


def _draining(store: str) -> bool:
    fleet = open_backend(store)
    try:
        return any(
            h.state in ("draining", "in_maintenance")
            for c in CLUSTERS
            for h in fleet.peek(c).snapshot().hosts
        )
    finally:
        fleet.close()


async def test_three_workers_share_one_postgresql_record_through_a_kill_and_a_restart(
    dev_env: Any, tmp_path: Path, pg_server: PgServer, pg_store: str, task_queue: str
):
    """Trains on three clusters finish on three workers sharing one PostgreSQL store, though
    one worker is killed mid-drain and PostgreSQL restarts; the audit passes on the record."""
    home = tmp_path / "home-init"
    home.mkdir()
    env = {"TRAINCTL_HOME": str(home)}
    r = CliRunner(env=env).invoke(
        main, ["fleet", "init", "--preset", "multi", "--speed", "36000", "--store", pg_store]
    )
    assert r.exit_code == 0, r.output
    log = tmp_path / "workers.log"
    procs = [_worker(dev_env, tmp_path / f"home-{i}", pg_store, task_queue, log) for i in range(3)]
    handles = []
    try:
        for c in CLUSTERS:
            with contextlib.suppress(RPCError):
                await dev_env.client.get_workflow_handle(arbiter_workflow_id(c)).terminate("t")
            handles.append(
                await dev_env.client.start_workflow(
                    ClusterTrain.run,
                    TrainInput(spec=spec(cluster=c, stop_after_cycles=1)),
                    id=f"train-{c}-{uuid.uuid4().hex[:8]}",
                    task_queue=task_queue,
                )
            )
        for _ in range(600):
            if await asyncio.to_thread(_draining, pg_store):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no host ever drained")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        await asyncio.to_thread(pg_server.restart)
        procs.append(_worker(dev_env, tmp_path / "home-3", pg_store, task_queue, log))
        finals: list[TrainStatus] = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in handles)), 360
        )
    except BaseException:
        print(log.read_text()[-4000:])
        raise
    finally:
        for wid in [h.id for h in handles] + [arbiter_workflow_id(c) for c in CLUSTERS]:
            with contextlib.suppress(RPCError):
                await dev_env.client.get_workflow_handle(wid).terminate("test cleanup")
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(40)
            if p.poll() is None:
                p.kill()
    for final in finals:
        assert final.state == "stopped" and final.cycles_completed == 1, final
        assert final.hosts_visited_this_cycle + final.quarantined + final.in_repair == 64
    r = CliRunner(env={**env, STORE_ENV: pg_store}).invoke(main, ["audit", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["ok"]
    cordons, most = _record_holds(pg_store)
    assert cordons >= 3 * 64 and len(most) == 3 and all(n > 0 for n in most.values()), most
