"""One drain sequence (``execution.drain_sequence``) for the train, an operation and the simulator.

One scenario: three jobs are due on ``small``'s c00 (every other host already visited; the
operation's scope is their hosts), with pinned answers: one says go, one waits for its next
checkpoint, one refuses (job-aware: a "go" takes effect right after the next checkpoint). It
runs through a live train's domains and a live operation's waves on the time-skipping server
over a real SQLite fleet, and through the simulator's engine, each recording the commands its
interpreter took from the sequence. For each host the first visit's drain decisions (ask, wait
until, evict, release) are the same in all three; the refusing job's hosts go back untouched
and are asked again by a later visit (domain or wave), which, their refusals spent, evicts them
right after a checkpoint (a train is back right after one; an operation's later wave, hours
on, waits for the next). The operation with
the refusing job succeeds and covers its whole scope.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.contracts.train_types import TrainInput
from orchestrator.execution import drain_sequence as ds
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig
from orchestrator.simulator.engine import Engine
from tests.e2e import NEW, audit_ok, op_spec, outcome, start_op, upper, worker
from tests.train_helpers import TARGETS, host_states, make_fleet, spec
from workflows.cluster_train import ClusterTrain

SEED = 4
MAX_WAIT = 3.0
ANSWERS = ("go", "checkpoint", "refuse")


def _scenario(sim: ClusterSim) -> dict[str, str]:
    """Three mid-size jobs due, with a known checkpoint schedule (every hour, the next at 0.5)
    and pinned answers; every other host visited (a train's cycle has only them left; an
    operation's scope is their hosts). host -> its job's answer."""
    jobs = sorted(
        (j for j in sim.jobs.values() if j.state == "running" and 2 <= j.size <= 4),
        key=lambda j: j.id,
    )[: len(ANSWERS)]
    out: dict[str, str] = {}
    for job, answer in zip(jobs, ANSWERS, strict=True):
        job.start, job.ckpt_hours, job.work_hours = -0.5, 1.0, 200.0
        sim.dirty_jobs.add(job.id)
        sim.state.job_behaviours[str(job.id)] = answer
        out.update({h: answer for h in job.hosts})
    for h in sim.hosts.values():
        if h.name not in out:
            h.last_visit = 0.0
            sim.dirty_hosts.add(h.name)
    return out


class Recorder:
    """Every drain command the sequence hands out, by job: (kind, fleet hour)."""

    def __init__(self) -> None:
        self.by_job: dict[int, list[tuple[str, float]]] = {}
        self.hosts: dict[int, list[str]] = {}

    def note(self, seq: ds.DrainSequence, cmd: ds.DrainCommand) -> None:
        jobs = {w.job_id: w.hosts for w in seq.waits}
        self.hosts.update(jobs)
        if isinstance(cmd, ds.Ask):
            hit = list(cmd.planned)
        elif isinstance(cmd, ds.Evict):
            hit = list(cmd.job_ids)
        elif isinstance(cmd, ds.Release):
            hit = list(cmd.jobs)
        elif isinstance(cmd, ds.WaitUntil):
            hit = list(jobs)
        else:
            return
        kind = {
            ds.Ask: "ask",
            ds.Evict: "evict",
            ds.Release: "release",
            ds.WaitUntil: "wait until",
        }[type(cmd)]
        for job in hit:
            steps = self.by_job.setdefault(job, [])
            if not steps or steps[-1] != (kind, seq.now):  # a replayed task repeats itself
                steps.append((kind, seq.now))

    def decisions(self, answers: dict[str, str]) -> dict[str, list[str]]:
        """host -> the decision kinds of its job, in order, for the scenario's hosts."""
        out: dict[str, list[str]] = {}
        for job, steps in self.by_job.items():
            for host in self.hosts.get(job, []):
                if host in answers:
                    out[host] = [k for k, _ in steps]
        return out


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    rec = Recorder()
    plain = ds.DrainSequence.next

    def next_(self: ds.DrainSequence) -> ds.DrainCommand:
        cmd = plain(self)
        rec.note(self, cmd)
        return cmd

    monkeypatch.setattr(ds.DrainSequence, "next", next_)
    yield rec


def _first_visit(kinds: list[str]) -> list[str]:
    """A host's decisions up to its first eviction or release (the first visit)."""
    out: list[str] = []
    for k in kinds:
        out.append(k)
        if k in ("evict", "release"):
            return out
    return out


EXPECTED_FIRST = {
    # job-aware times an eviction right after the job's next checkpoint: "go" takes effect then
    "go": ["ask", "wait until", "evict"],
    "checkpoint": ["ask", "wait until", "evict"],
    "refuse": ["ask", "release"],
}


def _check(decisions: dict[str, list[str]], answers: dict[str, str], who: str) -> None:
    assert set(decisions) == set(answers), (who, decisions)
    for host, kinds in decisions.items():
        answer = answers[host]
        assert _first_visit(kinds) == EXPECTED_FIRST[answer], (who, host, answer, kinds)
        if answer == "refuse":  # a later visit asks again, its refusals spent: evicted
            rest = kinds[len(EXPECTED_FIRST["refuse"]) :]
            assert rest and rest[0] == "ask" and rest[-1] == "evict", (who, host, kinds)


def _simulated() -> dict[str, str]:
    sim = build_cluster(get_preset("small"), SEED)
    answers = _scenario(sim)
    s = _train_spec()
    engine = Engine(
        sim,
        SimConfig(
            preset=get_preset("small"),
            policy="job-aware",
            budget=CapacityBudget.model_validate(s.budget.model_dump()),
            domain_size=s.domain_size,
            seed=SEED,
            max_wait_hours=MAX_WAIT,
            targets=dict(TARGETS),
            max_refusals=2,
        ),
    )
    assert engine.run().complete
    return answers


def _train_spec() -> Any:
    return spec(
        stop_after_cycles=1,
        domain_size=8,
        policy="job-aware",
        drain={"max_wait": f"{MAX_WAIT}h", "max_refusals": 2},
    )


async def _live_train(env: Any, home: Path, task_queue: str) -> dict[str, str]:
    now = await env.get_current_time()
    path = make_fleet(home, 1.0, now, seed=SEED)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00", now) as sim:
        answers = _scenario(sim)
    fleet.close()
    async with build_worker(env.client, path, task_queue):
        status = await env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=_train_spec()),
            id=f"train-c00-seq-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert status.cycles_completed == 1
    return answers


async def _live_operation(
    env: Any, home: Path, task_queue: str
) -> tuple[OperationStatus, Path, dict[str, str]]:
    now = await env.get_current_time()
    path = make_fleet(home, 1.0, now, seed=SEED)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00", now) as sim:
        answers = _scenario(sim)
    fleet.close()
    raw = op_spec(
        scope={"cluster": "c00", "hosts": sorted(answers)},
        drain={"max_wait": f"{MAX_WAIT}h", "max_refusals": 2},
        max_failures=3,
    )
    async with worker(env, path, task_queue):
        status = await outcome(await start_op(env, task_queue, raw))
    return status, path, answers


async def test_one_drain_sequence_for_train_operation_and_simulator(
    temporal_env, tmp_home, task_queue, recorder
):
    """The same scenario through the simulator, a live train and a live operation: the same
    drain decisions for each host."""
    answers = _simulated()
    seen = {"simulator": recorder.decisions(answers)}
    recorder.by_job.clear()
    (tmp_home / "train").mkdir()
    assert await _live_train(temporal_env, tmp_home / "train", task_queue) == answers
    seen["train"] = recorder.decisions(answers)
    recorder.by_job.clear()
    (tmp_home / "op").mkdir()
    status, _, op_answers = await _live_operation(temporal_env, tmp_home / "op", task_queue)
    assert status.state == "succeeded", status.reason
    assert op_answers == answers
    seen["operation"] = recorder.decisions(answers)
    for who, decisions in seen.items():
        _check(decisions, answers, who)
    first = {who: {h: _first_visit(k) for h, k in d.items()} for who, d in seen.items()}
    assert first["simulator"] == first["train"] == first["operation"]


async def test_operation_with_a_refusing_job_requeues_it_and_covers_its_scope(
    temporal_env, tmp_home, task_queue, recorder
):
    """A refusing job's hosts are handed back untouched and re-queued to a later wave; the
    operation succeeds over its whole scope (the audit holds it to the scope it recorded)."""
    status, path, answers = await _live_operation(temporal_env, tmp_home, task_queue)
    assert status.state == "succeeded", status.reason
    c00 = status.clusters["c00"]
    refusing = [h for h, a in answers.items() if a == "refuse"]
    assert c00.hosts_requeued == len(refusing)
    assert c00.waves_done >= 2  # the refusing job's hosts went in a later wave
    assert c00.hosts_changed == len(answers) and c00.hosts_deferred == 0
    states = host_states(path)
    assert all(upper(states[h][2]) == NEW for h in answers), "a host of the scope was left"
    assert all(states[h][0] == "in_service" for h in answers)
    fleet = SqliteFleet(path)
    events = [ev for _, ev, _ in fleet.events()]
    fleet.close()
    released: dict[str, float] = {}
    for e in events:
        if e.kind == "host_state" and e.host in refusing and e.detail.get("after") == "in_service":
            released.setdefault(e.host, e.t)  # the first: handed back untouched
    updated = {e.host: e.t for e in events if e.kind == "updated" and e.host in refusing}
    assert set(updated) == set(refusing)
    assert all(released[h] < updated[h] for h in refusing), "changed before handed back"
    audit_ok(path)
