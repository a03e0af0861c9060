"""Job negotiation: a job asked before its eviction answers go, wait, or not now, and the drain
obeys, the same way in the simulator and in a live train on the time-skipping server.

Each scenario leaves one job due for maintenance on ``small`` (every other host counts as
visited this cycle), pins that job's answer, and runs one cycle: the simulator's engine, then a
live ``ClusterTrain`` over a real SQLite fleet at speed 1, built from the same seed.
"""

from __future__ import annotations

import uuid

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.messages import JobReply, JobWait
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.train_types import TrainInput
from orchestrator.execution.drain import DrainTracker
from orchestrator.execution.negotiation import Talk, resolve
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.presets import get_preset
from orchestrator.simulator import SimConfig
from orchestrator.simulator.engine import Engine
from tests.train_helpers import TARGETS, make_fleet, spec
from workflows.cluster_train import ClusterTrain

SEED = 4
MAX_WAIT = 3.0


def test_refusals_are_bounded_then_the_deadline_rules():
    """Two refusals with max_refusals 2: asked again after the first, evicted at the deadline."""
    first = resolve(Talk(), "refuse", 0.5, "busy", 0.0, 3.0, 2, 0.0)
    assert first.ask_at == 0.5 and first.evict_at is None
    second = resolve(first, "refuse", 1.5, "busy", 0.5, 3.0, 2, 0.5)
    assert second.evict_at == 3.0 and second.refusals == 2
    assert resolve(Talk(), "wait", 9.0, "", 0.0, 3.0, 2, 0.0).evict_at == 3.0  # bounded
    assert resolve(first, "refuse", 1.5, "", 0.5, 3.0, 2, 0.5, final=2.5).evict_at == 2.5
    assert resolve(Talk(), "go", None, "", 1.0, 3.0, 2, 1.0).evict_at == 1.0  # at once
    assert resolve(Talk(), "go", None, "", 1.0, 3.0, 2, 2.0).evict_at == 2.0  # as planned
    assert resolve(Talk(), "refuse", 4.0, "", 3.0, 3.0, 2, 3.0).evict_at == 3.0  # past deadline


def test_an_answer_past_the_deadline_keeps_the_job_until_the_deadline_not_at_once():
    """With no checkpoint left before the deadline (final = now), a wait past the deadline and
    a refusal the visit still honours keep the job to the deadline; spent refusals do not."""
    now, deadline = 1.0, 1.01
    wait = resolve(Talk(), "wait", 1.2, "", now, deadline, 2, now, final=now)
    assert wait.evict_at == deadline
    refuse = resolve(Talk(), "refuse", None, "", now, deadline, 2, now, final=now)
    assert refuse.evict_at == deadline and refuse.refusals == 1
    spent = resolve(Talk(refusals=1), "refuse", None, "", now, deadline, 2, now, final=now)
    assert spent.evict_at == now and spent.refusals == 2
    ahead = resolve(Talk(), "wait", 1.2, "", now, deadline, 2, now, final=1.005)
    assert ahead.evict_at == 1.005  # its last checkpoint before the deadline, still ahead


def test_releasing_tracker_hands_a_refusing_job_back_and_counts_on():
    """A releasing tracker hands a refusing job's hosts back at once; the next visit counts on
    from the refusals noted, and once they are spent evicts at the policy's instant (the next
    checkpoint; at once right after one), not at the last one before the deadline."""
    t = DrainTracker(4.0, negotiate=True, release=True, max_refusals=2)
    w = JobWait(job_id=7, hosts=["a", "b"], action="evict_after_checkpoint", at_hours=0.5)
    d = t.decide([w], 0.0)
    assert d.ask == {7: 0.5}
    t.heard({7: JobReply(answer="refuse", until_hours=0.5)}, d.ask, 0.0)
    d = t.decide([w], 0.0)
    assert d.release == {7: ["a", "b"]} and not d.evict and not d.ask
    # The next visit, at 0.5: the fleet's note says one refusal so far.
    t2 = DrainTracker(4.5, negotiate=True, release=True, max_refusals=2)
    w2 = w.model_copy(update={"at_hours": 1.5, "final_hours": 3.5, "refusals": 1})
    d = t2.decide([w2], 0.5)
    assert d.ask == {7: 1.5}
    t2.heard({7: JobReply(answer="refuse", until_hours=1.5)}, d.ask, 0.5)
    assert t2.talks[7].refusals == 2 and t2.talks[7].evict_at == 1.5
    assert t2.decide([w2], 0.5).wake_at_hours == 1.5
    assert t2.decide([w2], 1.5).evict == [7]
    # Taken again right after its checkpoint (as it asked): stopped at once, losing nothing.
    t3 = DrainTracker(4.5, negotiate=True, release=True, max_refusals=2)
    w3 = w2.model_copy(update={"last_checkpoint_hours": 0.5})
    d = t3.decide([w3], 0.5 + 1e-4)
    t3.heard({7: JobReply(answer="refuse", until_hours=1.5)}, d.ask, 0.5 + 1e-4)
    assert t3.decide([w3], 0.5 + 1e-4).evict == [7]


def test_tracker_asks_before_it_evicts():
    """A negotiating tracker asks first, then evicts when the answer says, not before."""
    t = DrainTracker(3.0, negotiate=True)
    wait = [JobWait(job_id=7, hosts=["h"], action="evict_now", at_hours=0.0)]
    d = t.decide(wait, 0.0)
    assert d.ask == {7: 0.0} and not d.evict
    t.heard({7: JobReply(answer="wait", until_hours=0.5)}, d.ask, 0.0)
    assert t.decide(wait, 0.0).wake_at_hours == 0.5
    assert t.decide(wait, 0.5).evict == [7]


def _one_job_due(sim: ClusterSim, behaviour: str) -> tuple[int, list[str]]:
    """Leave one mid-size job's hosts due (the rest visited at hour 0), with a known checkpoint
    schedule (every hour, the next at 0.5) and a pinned answer."""
    job = min(
        (j for j in sim.jobs.values() if j.state == "running" and 2 <= j.size <= 8),
        key=lambda j: j.id,
    )
    job.start, job.ckpt_hours, job.work_hours = -0.5, 1.0, 200.0
    sim.dirty_jobs.add(job.id)
    sim.state.job_behaviours[str(job.id)] = behaviour
    for h in sim.hosts.values():
        if h.name not in job.hosts:
            h.last_visit = 0.0
            sim.dirty_hosts.add(h.name)
    return job.id, list(job.hosts)


def _train_spec(policy: str):
    return spec(
        stop_after_cycles=1,
        domain_size=8,
        policy=policy,
        drain={"max_wait": f"{MAX_WAIT}h", "max_refusals": 2},
    )


def _simulated(behaviour: str, policy: str) -> tuple[list[tuple[float, int, float]], dict, int]:
    sim = build_cluster(get_preset("small"), SEED)
    job_id, _ = _one_job_due(sim, behaviour)
    s = _train_spec(policy)
    engine = Engine(
        sim,
        SimConfig(
            preset=get_preset("small"),
            policy=policy,
            budget=CapacityBudget.model_validate(s.budget.model_dump()),
            domain_size=s.domain_size,
            seed=SEED,
            max_wait_hours=MAX_WAIT,
            targets=dict(TARGETS),
            max_refusals=2,
        ),
    )
    assert engine.run().complete
    return [e for e in engine.tally.evictions if e[1] == job_id], engine.tally.answers, job_id


async def _live(env, tmp_home, task_queue, behaviour: str, policy: str):
    now = await env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now, seed=SEED)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00", now) as sim:
        job_id, hosts = _one_job_due(sim, behaviour)
    async with build_worker(env.client, path, task_queue):
        status = await env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=_train_spec(policy)),
            id=f"train-c00-neg-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert status.cycles_completed == 1
    events = [ev for _, ev, _ in fleet.events()]
    report = audit(fleet)
    fleet.close()
    assert report.ok, report.violations[:3]
    asked = [e for e in events if e.kind == "job_asked" and e.detail["job"] == job_id]
    evicted = [
        (e.t, job_id, e.detail["lost_gpu_hours"])
        for e in events
        if e.kind == "job_interrupted" and e.detail["job"] == job_id
    ]
    # The job's hosts going back to service untouched (no visit) while it still runs.
    released = [
        e.t
        for e in events
        if e.kind == "host_state"
        and e.host in hosts
        and e.detail.get("after") == "in_service"
        and e.t < (evicted[0][0] if evicted else float("inf"))
    ]
    return asked, evicted, released


@pytest.mark.parametrize(
    ("behaviour", "policy"),
    [
        ("go", "drain-wait"),
        ("checkpoint", "rolling-serial"),
        ("refuse", "drain-wait"),
        ("refuse", "job-aware"),
    ],
)
async def test_answer_in_simulator_and_live_train(
    temporal_env, tmp_home, task_queue, behaviour, policy
):
    """go (drain-wait): evicted at once; checkpoint: right after its next checkpoint (0.5),
    not before; refuse: asked twice, then the deadline rules: drain-wait evicts at the drain
    deadline; job-aware hands the job's hosts back at the first refusal (holding them would
    only hold the budget), takes them again once it may ask again, right after the job's
    checkpoint (0.5), and with the refusals spent stops it then, losing nothing, not at the
    last checkpoint before the deadline (2.5); simulator and live agree."""
    sim_evicted, sim_answers, _ = _simulated(behaviour, policy)
    asked, live_evicted, released = await _live(
        temporal_env, tmp_home, task_queue, behaviour, policy
    )
    assert len(sim_evicted) == len(live_evicted) == 1
    (t_sim, _, lost_sim), (t_live, _, lost_live) = sim_evicted[0], live_evicted[0]
    assert t_live == pytest.approx(t_sim, abs=0.01)
    assert lost_live == pytest.approx(lost_sim, abs=0.5)
    cordoned = asked[0].t
    if behaviour == "go":
        assert [a.detail["answer"] for a in asked] == ["go"]
        # at once, before its checkpoint (drain-wait alone would wait for the deadline)
        assert t_live == pytest.approx(cordoned, abs=1e-3)
        assert lost_live > 0  # its owner accepted losing the work since the last checkpoint
    elif behaviour == "checkpoint":
        assert [a.detail["answer"] for a in asked] == ["wait"]
        assert 0.5 <= t_live <= 0.5 + 0.01  # right after the checkpoint, not before
        assert lost_live < 0.1
    else:
        assert [a.detail["answer"] for a in asked] == ["refuse", "refuse"]
        assert asked[1].t == pytest.approx(0.5, abs=0.01)  # asked again after its checkpoint
        assert sim_answers.get("refuse") == 2
        if policy == "job-aware":
            assert 0.5 <= t_live <= 0.5 + 0.01 and lost_live < 0.1
            assert released, "the job's hosts were handed back between the two questions"
            assert all(asked[0].t <= t <= asked[1].t for t in released)
        else:
            assert t_live == pytest.approx(cordoned + MAX_WAIT, abs=0.01)  # at the deadline
