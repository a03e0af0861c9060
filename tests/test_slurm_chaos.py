"""Chaos on real Slurm (issue 29, Done when): a CUDA upgrade over two lab clusters of 8 nodes
survives a slurmctld restart, a killed slurmd and a SIGKILLed worker.

The worker runs as its own process (``trainctl worker``, as a supervisor would run it) against
the test's Temporal server. During a ``cuda-upgrade`` operation over both clusters, cluster
a's slurmctld is restarted, one slurmd of cluster b is killed (Slurm marks the node not
responding, then down), an operator drains a node of cluster a with a reason, and the worker is
SIGKILLed once and started again. The operation must finish; Slurm must show no node drained
by trainctl (reason ``trainctl:``) except ones it quarantined with a reason; the operator's
node keeps its drain and reason; the audit is ok.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.constants import QUARANTINE_OWNER
from orchestrator.fleet import fleet_path, open_backend
from orchestrator.lab.slurm import lab_versions, restart_controller
from orchestrator.lab.slurm_files import lab_dir
from tests.cli_inproc import cli
from tests.e2e import audit_ok, terminate
from tests.test_slurm_e2e import assert_jobs_run_or_wait, node_table, slurm, submit
from tests.test_slurm_two_clusters import NEW, write
from tests.test_slurm_two_clusters import two_labs as two_labs  # noqa: F401 (the fixture)

REPO = Path(__file__).resolve().parent.parent
ENTRY = "from orchestrator.app.cli import entrypoint; entrypoint()"
BUDGET = 3
OPERATOR_NODE = "a07"
OPERATOR_REASON = "operator: PSU swap, ticket 9001"
KILLED_NODE = "b08"

#: Liveness bounds (wall seconds from the start), not speed claims: alone the whole test takes
#: ~95 s, but in the full suite on a loaded machine the operation has needed more than 170 s
#: to finish after the chaos (it succeeded). A real hang still fails here.
PROGRESS_BOUND = 360
DONE_BOUND = 420


def start_worker(env: dict[str, str], log: Path, queue: str) -> subprocess.Popen[bytes]:
    """``trainctl worker`` as its own process; returns once it polls."""
    seen = log.read_text().count("worker started") if log.exists() else 0
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, "worker", "--task-queue", queue, "--metrics-port", "0"],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=sink,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if log.read_text().count("worker started") > seen:
            return proc
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the worker never started: " + log.read_text()[-3000:])


def kill_slurmd(home: Path, cluster: str, node: str) -> None:
    pid = int((lab_dir(home, cluster) / "run" / f"slurmd.{node}.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)


async def op_state(op_id: str) -> dict[str, Any]:
    code, out, err = await cli("ops", "status", "--id", op_id, "--json")
    return out if code == 0 else {"state": "?", "err": err}


async def test_cuda_upgrade_on_two_slurm_clusters_survives_chaos(
    dev_env, tmp_home, task_queue, two_labs, monkeypatch
):
    a, b = two_labs
    address = dev_env.client.service_client.config.target_host
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    jobs = [submit(a, 2, 600), submit(b, 4, 600), submit(b, 2, 600)]
    spec = {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "*"},
        "targets": NEW,
        "consistency": "job",
        "budget": {"max_unavailable": BUDGET},
        "drain": {"max_wait": "20s"},
        "request_id": "cuda-13-1-chaos",
    }
    log = tmp_home / "worker.log"
    worker = start_worker(env, log, task_queue)
    chaos: list[tuple[str, float]] = []
    t0 = time.monotonic()
    try:
        code, out, err = await cli(
            "ops", "start", "--spec", write(tmp_home, "op", spec),
            "--task-queue", task_queue, "--json",
        )  # fmt: skip
        assert code == 0, (out, err)
        op_id = out["operation_id"]

        async def updated(cluster: str, n: int) -> None:
            while len(lab_versions(tmp_home, cluster)) < n:
                assert time.monotonic() - t0 < PROGRESS_BOUND, await op_state(op_id)
                await asyncio.sleep(0.5)

        await updated("a", 1)
        slurm(
            a, "scontrol", "update", f"nodename={OPERATOR_NODE}", "state=drain",
            f"reason={OPERATOR_REASON}",
        )  # fmt: skip
        chaos.append(("operator drain", time.monotonic() - t0))
        kill_slurmd(tmp_home, "b", KILLED_NODE)
        chaos.append(("slurmd killed", time.monotonic() - t0))
        await updated("a", 4)  # the second wave of cluster a under way
        await asyncio.to_thread(restart_controller, tmp_home, "a")
        chaos.append(("slurmctld restarted", time.monotonic() - t0))
        await updated("b", 4)
        await asyncio.sleep(1.5)  # mid-wave, as often as not mid-activity
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        chaos.append(("worker killed", time.monotonic() - t0))
        worker = start_worker(env, log, task_queue)
        while (status := await op_state(op_id))["state"] in ("running", "pending", "?"):
            assert time.monotonic() - t0 < DONE_BOUND, (chaos, status)
            await asyncio.sleep(2)
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        for c in ("a", "b"):
            await terminate(dev_env, arbiter_workflow_id(c, task_queue))
    print("chaos", chaos, "took", round(time.monotonic() - t0), "s", json.dumps(status)[:2000])
    assert status["state"] == "succeeded", (chaos, status)
    path = fleet_path(tmp_home)
    fleet = open_backend(path)
    try:
        hosts = {n: h for c in ("a", "b") for n, h in fleet.peek(c).hosts.items()}
        quarantined = {n: h.reason for n, h in hosts.items() if h.owner == QUARANTINE_OWNER}
        print({n: (h.state, h.owner, h.reason) for n, h in hosts.items() if h.owner})
    finally:
        fleet.close()  # type: ignore[attr-defined]
    for lab in (a, b):
        table = node_table(lab)
        ours = {n: r for n, (_, r, _) in table.items() if r.startswith("trainctl:")}
        # Only nodes trainctl quarantined, each with its reason, stay drained by it.
        assert set(ours) <= set(quarantined), (lab.cluster, ours, quarantined)
        assert all(r.strip() != f"trainctl:{QUARANTINE_OWNER}" for r in ours.values()), ours
        # Every schedulable node carries the new pair.
        installed = lab_versions(tmp_home, lab.cluster)
        for n in lab.nodes:
            if n in (OPERATOR_NODE, KILLED_NODE) or n in quarantined:
                continue
            assert {c: installed[n][c] for c in NEW} == NEW, (n, installed.get(n))
    state, reason, _ = node_table(a)[OPERATOR_NODE]
    assert "drain" in state and reason == OPERATOR_REASON, (state, reason)
    assert_jobs_run_or_wait(a, jobs[:1])
    assert_jobs_run_or_wait(b, jobs[1:])
    audit_ok(path)
