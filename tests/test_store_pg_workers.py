"""Three workers, each with a TRAINCTL_HOME of its own (nothing shared but the Temporal address
and the store URL, as on three machines), share one PostgreSQL record: trains on three clusters
of ``multi`` and a CUDA operation on the fourth, then a campaign over all four. The worker of a
domain whose hosts drain is SIGKILLed, and PostgreSQL restarts once. Everything finishes, the
audit passes, and the record shows no instant over either budget, no host with two owners and
no job on mixed driver/CUDA. Real PostgreSQL, real Temporal dev server, real worker processes."""

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

import pytest
from click.testing import CliRunner
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from orchestrator.app.cli import main
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.campaign_types import CampaignStatus
from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.contracts.train_spec import train_workflow_id
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.fleet import open_backend
from orchestrator.fleet.store_url import STORE_ENV
from orchestrator.train.status import visit_figures
from tests.e2e import CUDA, op_spec, trainctl, write_spec
from tests.pg_helpers import PgServer
from tests.train_helpers import spec, stop_processes
from workflows.cluster_train import ClusterTrain

REPO = Path(__file__).resolve().parent.parent
CLUSTERS = ("c00", "c01", "c02")
ALL = (*CLUSTERS, "c03")
KERNEL = "6.12.0-9"


def _worker(
    env: Any, home: Path, store: str, task_queue: str, log: Path
) -> subprocess.Popen[bytes]:
    """``trainctl worker`` of this tree (cwd and PYTHONPATH inherited) with its own home."""
    home.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", "from orchestrator.app.cli import entrypoint; entrypoint()"]
    cmd += ["worker", "--task-queue", task_queue, "--metrics-port", "0"]
    cmd += ["--address", env.client.service_client.config.target_host]
    env_vars = {**os.environ, "TRAINCTL_HOME": str(home), STORE_ENV: store}
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env_vars, stdout=out, stderr=out)


def _checks(store: str) -> tuple[int, int]:
    """(visits in place the record holds: ``checked``, nothing pending, never cordoned; hosts
    the record shows leaving for quarantine or repair at any time)."""
    fleet = open_backend(store)
    try:
        checks, failed = 0, set()
        for _, ev, _ in fleet.records():
            if ev.kind == "checked":
                checks += 1
            elif (
                ev.kind == "host_state"
                and ev.host
                and ev.detail["after"] in ("quarantined", "in_repair")
            ):
                failed.add(ev.host)
        return checks, len(failed)
    finally:
        fleet.close()  # type: ignore[attr-defined]


def _record_holds(store: str) -> tuple[int, dict[str, int]]:
    """(cordons, the most hosts held at once per cluster), read from the record alone: no host
    is taken while another owner holds it, and after every cordon neither the hosts owners
    hold nor those held for planned work exceed the budgets it was checked against (``limit``:
    out of service, ``maintenance``: planned work of every owner)."""
    fleet = open_backend(store)
    try:
        held: dict[str, dict[str, str]] = {}
        planned: dict[str, set[str]] = {}
        most: dict[str, int] = {}
        cordons = 0
        for _, ev, cluster in fleet.records():
            if ev.kind != "host_state" or ev.host is None:
                continue
            mine, work = held.setdefault(cluster, {}), planned.setdefault(cluster, set())
            after = ev.detail["after"]
            if after == "cordoned" and ev.detail.get("owner"):
                assert ev.host not in mine, f"{ev.host}: {mine[ev.host]} and {ev.detail['owner']}"
                mine[ev.host] = str(ev.detail["owner"])
                work.add(ev.host)
                cordons += 1
                assert len(mine) <= int(ev.detail["limit"]), (cluster, sorted(mine))
                if ev.detail.get("maintenance") is not None:
                    assert len(work) <= int(ev.detail["maintenance"]), (cluster, sorted(work))
            elif after == "in_service":
                mine.pop(ev.host, None)
            if after not in HELD_STATES:
                work.discard(ev.host)
            most[cluster] = max(most.get(cluster, 0), len(mine))
        return cordons, most
    finally:
        fleet.close()


def _jobs_on(store: str, cluster: str, upper: tuple[str, str]) -> int:
    """Jobs the record shows started on ``cluster`` on the gpu_driver/cuda pair ``upper``."""
    fleet = open_backend(store)
    try:
        return sum(
            1
            for _, ev, c in fleet.records(cluster=cluster)
            if ev.kind == "job_start" and (ev.detail["gpu_driver"], ev.detail["cuda"]) == upper
        )
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


def _hosts(store: str) -> list[tuple[str, str, str, dict[str, str]]]:
    fleet = open_backend(store)
    try:
        return [
            (h.name, c, str(h.state), dict(h.versions))
            for c in ALL
            for h in fleet.peek(c).snapshot().hosts
        ]
    finally:
        fleet.close()


async def _drainer(env: Any, task_queue: str, pids: set[int]) -> int | None:
    """The pid of the worker (one of ``pids``) that ran the latest task of a running domain
    workflow, whose hosts are out: its identity starts with ``pid@host``."""
    query = (
        f'TaskQueue="{task_queue}" AND WorkflowType="DomainMaintenance" '
        'AND ExecutionStatus="Running"'
    )
    async for wf in env.client.list_workflows(query):
        handle = env.client.get_workflow_handle(wf.id, run_id=wf.run_id)
        last = ""
        async for ev in handle.fetch_history_events():
            for attrs in (
                ev.workflow_task_started_event_attributes,
                ev.activity_task_started_event_attributes,
            ):
                last = attrs.identity or last
        pid = last.split("@", 1)[0]
        if pid.isdigit() and int(pid) in pids:
            return int(pid)
    return None


async def _terminate(env: Any, workflow_ids: list[str]) -> None:
    for wid in workflow_ids:
        with contextlib.suppress(RPCError):
            await env.client.get_workflow_handle(wid).terminate("test cleanup")


async def test_three_workers_share_one_postgresql_record_through_a_kill_and_a_restart(
    dev_env: Any,
    tmp_path: Path,
    pg_server: PgServer,
    pg_store: str,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """Trains on c00-c02 and a CUDA operation on c03, then a campaign over all four, finish on
    three workers sharing one PostgreSQL store, though the worker of a draining domain is
    killed and PostgreSQL restarts; the audit passes on the record, which shows no instant
    over either budget, no host with two owners and no job on mixed driver/CUDA."""
    home = tmp_path / "home-init"
    home.mkdir()
    for k, v in {"TRAINCTL_HOME": str(home), STORE_ENV: pg_store}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    r = CliRunner().invoke(
        main, ["fleet", "init", "--preset", "multi", "--speed", "36000", "--store", pg_store]
    )
    assert r.exit_code == 0, r.output
    log = tmp_path / "workers.log"
    procs = [_worker(dev_env, tmp_path / f"home-{i}", pg_store, task_queue, log) for i in range(3)]
    op = op_spec(scope={"cluster": "c03"})
    campaign = {
        "name": f"kernel-{uuid.uuid4().hex[:8]}",
        "targets": {"os": KERNEL},
        "scope": {"cluster": "*"},
        "stages": [{"name": "all", "clusters": "*", "parallel": 4}],
        "train": {"domain_size": 8, "budget": {"max_unavailable": "25%"}},
    }
    started = [arbiter_workflow_id(c, task_queue) for c in ALL]
    started += [train_workflow_id(c) for c in ALL] + [f"campaign-{campaign['name']}"]
    await _terminate(dev_env, started)  # none left running by another test
    trains: list[WorkflowHandle[Any, TrainStatus]] = []
    try:
        for c in CLUSTERS:
            trains.append(
                await dev_env.client.start_workflow(
                    ClusterTrain.run,
                    TrainInput(spec=spec(cluster=c, stop_after_cycles=1)),
                    id=f"train-{c}-{uuid.uuid4().hex[:8]}",
                    task_queue=task_queue,
                )
            )
            started.append(trains[-1].id)
        code, out, err = await trainctl(
            "ops", "start", "--spec", str(write_spec(tmp_path / "op.json", op)),
            "--task-queue", task_queue, "--json",
        )  # fmt: skip
        assert code == 0 and out["started"], err
        started.append(out["operation_id"])
        operation = dev_env.client.get_workflow_handle(
            out["operation_id"], result_type=OperationStatus
        )
        victim = None
        for _ in range(600):  # the worker of a domain whose hosts drain
            if await asyncio.to_thread(_draining, pg_store):
                victim = await _drainer(dev_env, task_queue, {p.pid for p in procs})
                if victim is not None:
                    break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no worker's hosts ever drained")
        killed = next(p for p in procs if p.pid == victim)
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        await asyncio.to_thread(pg_server.restart)
        procs.append(_worker(dev_env, tmp_path / "home-3", pg_store, task_queue, log))
        finals: list[TrainStatus] = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in trains)), 360
        )
        op_final = await asyncio.wait_for(operation.result(), 120)
        spec_file = write_spec(tmp_path / "campaign.json", campaign)
        args = ("campaign", "start", "--spec", str(spec_file), "--wait", "--json")
        code, out, err = await asyncio.wait_for(trainctl(*args, "--task-queue", task_queue), 360)
        assert "error" not in out, err
        rolled = CampaignStatus.model_validate(out)
    except BaseException:
        print(log.read_text()[-4000:])
        raise
    finally:
        await _terminate(dev_env, started)
        stop_processes(procs)
    for final in finals:
        assert final.state == "stopped" and final.cycles_completed == 1, final
        assert sum(visit_figures(final)) == 64
    assert op_final.state == "succeeded", op_final.reason
    assert code == 0 and rolled.state == "succeeded", rolled.reason
    assert [s.state for s in rolled.stages] == ["passed"]
    rows = _hosts(pg_store)
    up = [r for r in rows if r[2] == "in_service"]
    assert {r[1] for r in up} == set(ALL)
    assert all(r[3]["os"] == KERNEL for r in up), "an in-service host was missed"
    assert all(r[2] in ("quarantined", "in_repair") for r in rows if r[2] != "in_service")
    on_cuda = [r for r in up if r[1] == "c03"]
    assert on_cuda and all({k: r[3][k] for k in CUDA} == CUDA for r in on_cuda)
    r = CliRunner().invoke(main, ["audit", "--json"])
    assert r.exit_code == 0, r.output
    audited = json.loads(r.stdout)
    assert audited["ok"] and not audited["violations"], audited["violations"][:3]
    cordons, most = _record_holds(pg_store)
    # Every host was visited in both phases: taken, or (back from repair already on the
    # targets) checked in place; only a host that failed at some point (quarantined or in
    # repair when a phase reached it, as failures fall) may have missed one or both.
    checks, failed = _checks(pg_store)
    assert cordons + checks >= 2 * 4 * 64 - 2 * failed, (cordons, checks, failed)
    assert set(most) == set(ALL) and all(most.values()), most
    # jobs started on the new driver/CUDA (none on a mix of it and the old: the audit's
    # mixed_versions, checked above, covers every job of the record)
    assert _jobs_on(pg_store, "c03", (CUDA["gpu_driver"], CUDA["cuda"])) > 0
