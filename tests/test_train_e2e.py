"""End-to-end train behaviour on the real dev server, with a real SQLite fleet and no mocks.

Each test builds its own fleet in a private ``TRAINCTL_HOME`` at 10 fleet hours per wall second,
runs a worker on a fresh task queue and starts the train under a unique workflow id. The train
still names itself ``train-c00`` in the fleet (the owner of the hosts it holds), which is fine:
no two tests share a fleet. What the tests assert comes from the fleet's own event log and host
table, the way an operator or the audit would see it, not from the workflow's word.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import ControlRequest, TrainChange, TrainInput, TrainStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.cluster_sim import Event
from orchestrator.train.status import visit_figures
from tests.e2e import terminate, wait_for
from tests.train_helpers import TARGETS, host_states, make_fleet, spec, stop_processes
from workflows.cluster_train import ClusterTrain

SPEED = 36000.0  # 10 fleet hours per wall second
OWNER = "train-c00"  # the train's name in the fleet: spec.workflow_id
HELD = frozenset({"cordoned", "draining", "in_maintenance", "verifying"})
REPO = Path(__file__).resolve().parent.parent


def events(path: Path, since: int = 0) -> list[tuple[int, Event]]:
    fleet = SqliteFleet(path)
    try:
        return [(seq, ev) for seq, ev, _ in fleet.events(since=since)]
    finally:
        fleet.close()


def hosts_where(path: Path, pred: Callable[[Event], bool], since: int = 0) -> set[str]:
    return {ev.host for _, ev in events(path, since) if ev.host is not None and pred(ev)}


def last_seq(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
    finally:
        conn.close()


def cluster_targets(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT state FROM clusters WHERE name='c00'").fetchone()
        return dict(json.loads(row[0])["targets"])
    finally:
        conn.close()


def claim_standing(path: Path) -> bool:
    """Whether a train's piggyback claim on freed hosts is left with the fleet (c00)."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT state FROM clusters WHERE name='c00'").fetchone()
        return bool(json.loads(row[0]).get("piggyback"))
    finally:
        conn.close()


def is_cordon_by_train(ev: Event) -> bool:
    return ev.kind == "host_state" and ev.detail["after"] == "cordoned" and ev.actor == OWNER


def is_return_by_train(ev: Event) -> bool:
    """A host handed back to service after passing verification (a completed visit)."""
    d = ev.detail
    return (
        ev.kind == "host_state"
        and ev.actor == OWNER
        and d["before"] == "verifying"
        and (d["after"] == "in_service")
    )


def returns(path: Path, since: int = 0) -> int:
    return sum(is_return_by_train(ev) for _, ev in events(path, since))


def held_by_train(path: Path) -> list[str]:
    return sorted(n for n, (s, o, _) in host_states(path).items() if o == OWNER and s in HELD)


def assert_nothing_stranded(path: Path) -> None:
    """No host held by the train, none out of service without someone responsible; audit ok."""
    for name, (state, owner, _) in host_states(path).items():
        assert owner != OWNER, f"{name} still held by the train ({state})"
        fine = state in ("in_service", "quarantined", "in_repair")
        assert fine, f"{name} left {state} (owner {owner or '-'})"
    fleet = SqliteFleet(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    assert report.ok, report.violations[:3]


async def status(handle: WorkflowHandle[Any, TrainStatus]) -> TrainStatus:
    return await handle.query(ClusterTrain.status)


@contextlib.asynccontextmanager
async def running_train(
    env: WorkflowEnvironment, path: Path, task_queue: str, train_spec: TrainSpec
) -> AsyncIterator[WorkflowHandle[Any, TrainStatus]]:
    """An in-process worker and a train under a unique id; both torn down afterwards.

    The cluster's capacity arbiter (``capacity-c00``) lives on the task queue of the worker that
    first asked it, so a fresh one is needed per test: the previous test's worker is gone.
    """
    await terminate(env, arbiter_workflow_id(train_spec.cluster))
    async with build_worker(env.client, path, task_queue):
        handle = await env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        try:
            yield handle
        finally:
            await terminate(env, handle.id)
            await terminate(env, arbiter_workflow_id(train_spec.cluster))


# ----------------------------------------------------------------------------- tests
async def test_pause_drains_resume_continues_stop_hands_back(dev_env, tmp_home, task_queue):
    """Pause lets the hosts in maintenance finish and takes no more, resume carries on, and stop
    ends the train with every host handed back."""
    path = make_fleet(tmp_home, SPEED)
    async with running_train(dev_env, path, task_queue, spec()) as handle:
        await wait_for(lambda: returns(path) >= 8, "the first visits")

        paused = await handle.execute_update(ClusterTrain.pause, ControlRequest(reason="e2e"))
        assert paused.state == "paused"
        pause_seq = last_seq(path)
        # A plan already in flight at the pause may still cordon, and the fleet may piggyback
        # for the train until pausing withdrew its claim (which hands such hosts back).
        await wait_for(
            lambda: not held_by_train(path) and not claim_standing(path),
            "hosts in maintenance to drain to 0 and the claim to be withdrawn",
        )
        seq, visits = last_seq(path), returns(path)
        await asyncio.sleep(2.0)  # 20 fleet hours: several domains' worth of time
        assert returns(path) == visits, "hosts were visited while paused"
        assert not any(is_cordon_by_train(ev) for _, ev in events(path, seq))
        late = hosts_where(path, is_cordon_by_train, pause_seq)
        assert len(late) <= 8, "more than one plan cordoned hosts after the pause"
        assert (await status(handle)).state == "paused"

        resumed = await handle.execute_update(ClusterTrain.resume, ControlRequest())
        assert resumed.state == "running"
        await wait_for(lambda: returns(path) >= visits + 8, "visits after resume")

        stopping = await handle.execute_update(ClusterTrain.stop, ControlRequest(reason="e2e"))
        assert stopping.state == "stopping"
        final = await asyncio.wait_for(handle.result(), 60)
    assert final.state == "stopped"
    assert final.visits_total == returns(path)
    assert_nothing_stranded(path)


async def test_live_target_change_reaches_hosts_visited_after_it(dev_env, tmp_home, task_queue):
    """A new os target set mid-cycle lands on every host the train takes after the change while
    the cycle carries on, and cuda or gpu_driver targets are refused without changing anything."""
    new_os = "6.8.0-50"
    path = make_fleet(tmp_home, SPEED)
    async with running_train(dev_env, path, task_queue, spec()) as handle:
        await wait_for(lambda: returns(path) >= 8, "the first visits")

        for bad in ({"cuda": "12.6"}, {"gpu_driver": "560.35.03"}):
            with pytest.raises(WorkflowUpdateFailedError) as err:
                await handle.execute_update(ClusterTrain.reconfigure, TrainChange(targets=bad))
            assert next(iter(bad)) in str(err.value.cause)
            assert "bulk operation" in str(err.value.cause)
        assert (await status(handle)).targets == TARGETS

        changed = await handle.execute_update(
            ClusterTrain.reconfigure, TrainChange(targets={"os": new_os})
        )
        assert changed.targets == {**TARGETS, "os": new_os}
        seq = last_seq(path)
        visited_before = hosts_where(path, is_return_by_train)
        await wait_for(lambda: returns(path, seq) >= 16, "visits after the change")
        st = await status(handle)
    assert st.cycles_completed == 0  # sliding: the running cycle goes on, nothing restarts
    assert st.hosts_visited_this_cycle >= len(visited_before) + 8

    taken_after = hosts_where(path, is_cordon_by_train, seq)
    assert taken_after and not taken_after & visited_before  # no re-visit within the cycle
    updated: dict[str, dict[str, str]] = {}
    for _, ev in events(path):
        if ev.kind == "updated":
            assert not {"cuda", "gpu_driver"} & set(ev.detail["after"]), ev
            # The train's own installs (repair's reimage of a host that failed later installs
            # only what it lacked, and an install with nothing pending changes nothing).
            train_install = ev.actor.startswith("train-") and ev.detail["after"]
            if ev.host is not None and ev.host in taken_after and train_install:
                updated.setdefault(ev.host, ev.detail["after"])
    assert len(updated) >= 8
    assert all(after["os"] == new_os for after in updated.values()), updated
    states = host_states(path)
    failed = hosts_where(path, lambda ev: ev.kind == "failure")
    for host in visited_before - failed:  # a repaired host may take the new os: that is fine
        if states[host][0] == "in_service":
            assert states[host][2]["os"] == TARGETS["os"], host  # waits for the next cycle
    assert "cuda" not in cluster_targets(path) and "gpu_driver" not in cluster_targets(path)


async def test_bad_build_halts_the_train(dev_env, tmp_home, task_queue):
    """A nic_firmware build that breaks every host halts the train after a few failures, with a
    reason, and it takes no further hosts while halted."""
    path = make_fleet(tmp_home, SPEED)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00") as sim:
        sim.inject_fault("nic_firmware", TARGETS["nic_firmware"], 1.0, "test")
    fleet.close()
    train_spec = spec(domain_size=4, halt_after_failures=3)
    async with running_train(dev_env, path, task_queue, train_spec) as handle:

        async def halted() -> TrainStatus | None:
            st = await status(handle)
            return st if st.state == "halted" else None

        st = await wait_for(halted, "the train to halt")
        assert "failed" in st.reason

        # Halting withdraws the train's claim on freed hosts (an activity after the halt): until
        # then the fleet may still piggyback a host for it, which the withdrawal hands back.
        # A plan asked just before the halt may still cordon after it, and hands its hosts back
        # untouched: "while halted" starts once no activity of the train is in flight.
        async def settled() -> bool:
            pending = (await handle.describe()).raw_description.pending_activities
            return not pending and not held_by_train(path) and not claim_standing(path)

        await wait_for(settled, "domains and plans in flight to finish, the claim withdrawn")
        seq = last_seq(path)
        await asyncio.sleep(1.5)  # 15 fleet hours
        assert (await status(handle)).state == "halted"
        stopped = await handle.execute_update(ClusterTrain.stop, ControlRequest())
        assert stopped.state == "stopping"
        final = await asyncio.wait_for(handle.result(), 30)
    assert final.state == "stopped"
    log = events(path)
    assert not any(is_cordon_by_train(ev) for s, ev in log if s > seq), "cordoned while halted"
    quarantined = hosts_where(
        path,
        lambda ev: (
            ev.kind == "host_state" and ev.actor == OWNER and ev.detail["after"] == "quarantined"
        ),
    )
    assert not any(is_return_by_train(ev) for _, ev in log)  # no bad host went back to jobs
    assert_nothing_stranded(path)
    assert len(quarantined) >= train_spec.halt_after_failures
    # Failures are counted batch by batch as domains report them, so the halt lands before more
    # than one domain's worth of hosts past the limit has taken the bad build.
    assert len(quarantined) <= train_spec.halt_after_failures + train_spec.domain_size


async def test_budget_holds_with_hosts_already_broken(dev_env, tmp_home, task_queue):
    """With 4 hosts already in repair and a budget of 6, no cordon by the train ever leaves more
    than 6 hosts out of service, and the train still visits hosts."""
    path = make_fleet(tmp_home, SPEED)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00") as sim:
        broken = [sim.rack_hosts(rack)[0] for rack in sorted(sim._racks)[:4]]
        for name in broken:
            h = sim.hosts[name]
            if h.job_id is not None:
                sim.evict(h.job_id, "test")
            h.repair_until, h.owner = sim.now + 2000.0, "repair"  # outlasts the test
            sim._set_state(h, "in_repair", "fleet", "faulty_gpu")
    fleet.close()
    train_spec = spec(domain_size=8, budget={"max_unavailable": 6})
    async with running_train(dev_env, path, task_queue, train_spec) as handle:
        await wait_for(lambda: returns(path) >= 12, "visits under a tight budget")
        await handle.execute_update(ClusterTrain.stop, ControlRequest())
        assert (await asyncio.wait_for(handle.result(), 60)).state == "stopped"

    down: set[str] = set()
    cordons = 0
    for seq, ev in events(path):
        if ev.kind != "host_state" or ev.host is None:
            continue
        if ev.detail["after"] == "in_service":
            down.discard(ev.host)
        else:
            down.add(ev.host)
        if is_cordon_by_train(ev):
            cordons += 1
            assert len(down) <= 6, f"seq {seq}: {len(down)} hosts out after a cordon"
            assert set(broken) <= down  # the broken hosts counted against the budget
            held = sum(1 for h in down if h not in broken)
            assert held <= 2, f"seq {seq}: {held} hosts in maintenance next to 4 broken"
    assert cordons >= 8  # the rest of the visits came back from repair, handed over
    assert_nothing_stranded(path)


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ({"targets": {"cuda": "12.6"}}, ["cuda", "bulk operation"]),
        ({"targets": {"gpu_driver": "560.35.03"}}, ["gpu_driver", "bulk operation"]),
        ({"cluster": "c42"}, ["cluster", "c42"]),
        ({"budget": {"max_unavailable": "150%"}}, ["max_unavailable", "100%"]),
        ({"drain": {"max_wait": "-2h"}}, ["drain.max_wait", "negative"]),
        ({"targets": {"kernel": "6.9"}}, ["kernel", "unknown component"]),
    ],
)
def test_train_start_refuses_bad_spec(tmp_home, override, names):
    """`trainctl train start` exits 2 before touching Temporal, naming the bad field and why."""
    import yaml

    make_fleet(tmp_home, SPEED)
    doc = {
        "cluster": "c00",
        "domain_size": 8,
        "budget": {"max_unavailable": "3%"},
        "targets": dict(TARGETS),
        **override,
    }
    path = tmp_home / "train.yaml"
    path.write_text(yaml.safe_dump(doc))
    # An address nothing listens on: reaching Temporal would be exit 1, not 2.
    args = ["train", "start", "--spec", str(path), "--address", "127.0.0.1:1"]
    result = CliRunner().invoke(cli_main, args)
    assert result.exit_code == 2, result.output
    for name in names:
        assert name in result.output, result.output


def _worker_process(env: WorkflowEnvironment, home: Path, task_queue: str, log: Path):
    """``trainctl worker`` as a separate process, the way an operator runs the daemon."""
    cmd = [
        sys.executable,
        "-c",
        "from orchestrator.app.cli import entrypoint; entrypoint()",
        "worker",
        "--metrics-port",
        "0",
        "--task-queue",
        task_queue,
        "--address",
        env.client.service_client.config.target_host,
    ]
    env_vars = {**os.environ, "TRAINCTL_HOME": str(home)}
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env_vars, stdout=out, stderr=out)


async def test_worker_killed_mid_maintenance(dev_env, tmp_home, tmp_path, task_queue):
    """A worker killed with SIGKILL while hosts are in maintenance strands nothing: a second
    worker finishes the cycle, every host visited, quarantined or in repair, and the audit holds."""
    path = make_fleet(tmp_home, SPEED)
    log = tmp_path / "workers.log"
    await terminate(dev_env, arbiter_workflow_id("c00"))
    procs = [_worker_process(dev_env, tmp_home, task_queue, log)]
    handle = await dev_env.client.start_workflow(
        ClusterTrain.run,
        TrainInput(spec=spec(stop_after_cycles=1)),
        id=f"train-c00-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )
    try:

        def mid_maintenance() -> bool:
            states = host_states(path)
            return returns(path) >= 16 and any(
                s == "in_maintenance" and o == OWNER for s, o, _ in states.values()
            )

        stranded: list[str] = []
        for _ in range(3):  # a kill that lands just as a domain returned strands nothing: again
            await wait_for(mid_maintenance, "hosts mid-maintenance", timeout=90, every=0.02)
            procs[-1].send_signal(signal.SIGKILL)
            procs[-1].wait(10)
            stranded = held_by_train(path)
            procs.append(_worker_process(dev_env, tmp_home, task_queue, log))
            if stranded:
                break
        assert stranded  # the kill left hosts mid-maintenance in the fleet
        final: TrainStatus = await asyncio.wait_for(handle.result(), 150)
    except BaseException:
        print(log.read_text()[-4000:])
        raise
    finally:
        await terminate(dev_env, handle.id)
        await terminate(dev_env, arbiter_workflow_id("c00"))
        stop_processes(procs)
    assert final.state == "stopped" and final.cycles_completed == 1
    assert sum(visit_figures(final)) == 128
    states = host_states(path)
    for host in stranded:
        assert states[host][0] in ("in_service", "quarantined", "in_repair"), host
    assert_nothing_stranded(path)
