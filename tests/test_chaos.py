"""Chaos: a train and a CUDA operation on one cluster survive a SIGKILLed worker and server.

Issue 10's standing chaos test. Everything is real and in its own process: `trainctl server`
(the Temporal dev server, file-backed, so a restart finds every workflow where it was),
`trainctl worker`, the CLI for every start, stop and status, and the SQLite fleet (at 10 fleet
hours per wall second, so the outage itself is fleet time that jobs and repairs live through).
At seeded random points the worker is SIGKILLed twice and the server once (its `temporal` child
dies with it), each restarted a moment later. Then both run to the end: the operation until it
ends, the train until it has completed a visit cycle and is stopped.

What must hold afterwards, from the fleet's record and state alone: the audit is clean (owner
invariants, the budget at every instant of the record, no job started on mixed driver/CUDA), the
operation succeeded, and what it reports matches the fleet: every host it names as changed is on
the new pair, every in-service host of the cluster is on the new pair, and its counts add up to
the cluster. A kill lands mid-activity as often as not: a fleet session is one SQLite
transaction, so a killed activity changed nothing and its retry does the work once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.app.demo import free_port
from orchestrator.app.worker import TASK_QUEUE
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.constants import REPAIR_OWNER
from orchestrator.fleet import SqliteFleet
from tests.e2e import CUDA, NEW, op_spec, upper
from tests.test_hardening_server import dead, ready, start_server, wait_dead
from tests.train_helpers import TARGETS, host_states, make_fleet

REPO = Path(__file__).resolve().parent.parent
ENTRY = "from orchestrator.app.cli import entrypoint; entrypoint()"
SEED = 20261201
QUEUE = TASK_QUEUE  # `train start` always uses the default queue
SPEED = 36000.0  # fleet seconds per wall second


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> tuple[int, dict[str, Any]]:
    """The real CLI: (exit code, its JSON output)."""
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        out = {"stdout": done.stdout, "stderr": done.stderr[-2000:]}
    return done.returncode, out


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-c", ENTRY, "worker", "--task-queue", QUEUE],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=sink,
        )


def worker_up(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start a worker and wait until it polls, as a supervisor would (its first connect fails
    fast, by design, if the server is not up: then it is started again)."""
    for _ in range(5):
        seen = log.read_text().count("worker started") if log.exists() else 0
        proc = start_worker(env, log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if log.read_text().count("worker started") > seen:
                return proc
            time.sleep(0.1)
        proc.kill()
        proc.wait()
        time.sleep(1.0)
    raise AssertionError("the worker never started: " + log.read_text()[-3000:])


def server_child(proc: subprocess.Popen[str]) -> int | None:
    """The pid of the `temporal` binary the server runs (it must die with its parent)."""
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except FileNotFoundError:
        return None
    return int(children[0]) if children else None


def stop_all(worker: subprocess.Popen[bytes] | None, server: subprocess.Popen[str]) -> None:
    """End a chaos test's processes: the worker gracefully (SIGTERM, then kill), the server
    and the `temporal` binary it runs."""
    if worker is not None and worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
    child = server_child(server)
    server.kill()
    server.wait()
    if child is not None and not dead(child):
        os.kill(child, signal.SIGKILL)


def poll(env: dict[str, str], args: tuple[str, ...], done: Any, timeout: float) -> dict[str, Any]:
    """Run a status command until ``done(output)``; the last output."""
    deadline = time.monotonic() + timeout
    out: dict[str, Any] = {}
    while time.monotonic() < deadline:
        code, out = cli(env, *args)
        if code == 0 and done(out):
            return out
        time.sleep(1.0)
    raise AssertionError(f"{' '.join(args)} never got there: {out}")


def test_train_and_operation_survive_worker_and_server_kills(tmp_home: Path) -> None:
    rng = random.Random(SEED)
    port = free_port(0)
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_home), "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"}
    path = make_fleet(tmp_home, SPEED)
    train_file = tmp_home / "train.json"
    train_file.write_text(
        json.dumps(
            {
                "cluster": "c00",
                "domain_size": 8,
                "budget": {"max_unavailable": "10%"},
                "targets": TARGETS,
                "drain": {"max_wait": "4h"},
                "halt_after_failures": 1000,
            }
        )
    )
    raw = op_spec(request_id=f"chaos-{SEED}")
    op_file = tmp_home / "op.json"
    op_file.write_text(json.dumps(raw))
    op_id = f"ops-{raw['request_id']}"
    worker_log = tmp_home / "worker.log"
    server = start_server(tmp_home, port)
    worker: subprocess.Popen[bytes] | None = None
    kills: list[tuple[str, float]] = []
    try:
        ready(server)
        worker = worker_up(env, worker_log)
        code, started = cli(env, "train", "start", "--spec", str(train_file))
        assert code == 0, started
        code, op = cli(env, "ops", "start", "--spec", str(op_file), "--task-queue", QUEUE)
        assert code == 0 and op["started"], op
        # Seeded chaos: three kills within the first 20 s, the server's at a random turn.
        victims = ["worker", "worker", "server"]
        rng.shuffle(victims)
        times = sorted(rng.uniform(1.0, 20.0) for _ in victims)
        t0 = time.monotonic()
        for victim, at in zip(victims, times, strict=True):
            time.sleep(max(0.0, at - (time.monotonic() - t0)))
            kills.append((victim, round(time.monotonic() - t0, 1)))
            if victim == "worker":
                assert worker is not None and worker.poll() is None, (
                    "the worker died by itself: " + worker_log.read_text()[-3000:]
                )
                worker.send_signal(signal.SIGKILL)
                worker.wait()
                time.sleep(rng.uniform(0.2, 2.0))
                worker = worker_up(env, worker_log)
            else:
                child = server_child(server)
                server.send_signal(signal.SIGKILL)
                server.wait()
                assert child is None or wait_dead(child), "temporal outlived its server"
                time.sleep(rng.uniform(0.2, 2.0))
                server = start_server(tmp_home, port)
                ready(server)
        # Everything runs to its end: the operation, then a whole visit cycle of the train.
        final = poll(
            env,
            ("ops", "status", "--id", op_id),
            lambda o: o["state"] in ("succeeded", "failed", "aborted"),
            timeout=600,
        )
        poll(
            env,
            ("train", "status", "--cluster", "c00"),
            lambda o: o["cycles_completed"] >= 1,
            timeout=600,
        )
        code, stopped = cli(env, "train", "stop", "--cluster", "c00", "--reason", "chaos done")
        assert code == 0, stopped
        poll(env, ("train", "status", "--cluster", "c00"), lambda o: o["state"] == "stopped", 120)
        assert worker is not None and worker.poll() is None, worker_log.read_text()[-3000:]
    finally:
        stop_all(worker, server)
    assert [v for v, _ in kills].count("worker") == 2 and len(kills) == 3, kills
    assert final["state"] == "succeeded", (kills, final.get("reason"))
    fleet = SqliteFleet(path)
    try:
        report = audit(fleet)
        events = list(fleet.events())
    finally:
        fleet.close()
    assert report.ok, (kills, report.violations[:3])
    # What the operation reports is what the fleet shows.
    hosts = host_states(path)
    updated_by_op = {
        ev.host
        for _, ev, _ in events
        if ev.actor == op_id
        and ev.kind == "updated"
        and ev.detail.get("after", {}).get("gpu_driver") == CUDA["gpu_driver"]
    }
    quarantined_by_op = {
        ev.host
        for _, ev, _ in events
        if ev.actor == op_id and ev.kind == "host_state" and ev.detail["after"] == "quarantined"
    }
    changed = updated_by_op - quarantined_by_op
    c00 = final["clusters"]["c00"]
    assert c00["hosts_changed"] == len(changed), (c00, len(changed))
    assert all(upper(hosts[h][2]) == NEW for h in changed)
    assert all(upper(v) == NEW for s, _, v in hosts.values() if s == "in_service")
    # Every host is accounted for once: changed by it, quarantined by it, deferred (in repair
    # when it last planned, or taken into a wave and lost to repair before its change: the
    # pair is recorded as the cluster's target, and repair's reimage gives it), already on the
    # pair at its start, or given the pair by repair's reimage while it ran, never taken.
    assert c00["hosts_quarantined"] == len(quarantined_by_op), (c00, sorted(quarantined_by_op))
    deferred = set(c00["deferred_hosts"])
    assert c00["hosts_deferred"] == len(deferred), c00
    assert set(c00["lost_to_repair"]) <= deferred and not deferred & changed, c00
    reimaged = (
        {
            ev.host
            for _, ev, _ in events
            if ev.actor == REPAIR_OWNER
            and ev.kind == "updated"
            and ev.detail.get("after", {}).get("gpu_driver") == CUDA["gpu_driver"]
        }
        - updated_by_op
        - deferred
        - quarantined_by_op
    )
    # A host it quarantined before its change (failing already) is in repair at its end too:
    # counted as quarantined, not again as deferred.
    accounted = sum(c00[k] for k in ("hosts_changed", "hosts_quarantined", "already_done"))
    accounted += len(deferred - quarantined_by_op)
    assert accounted + len(reimaged) == 128, (c00, sorted(reimaged))
