"""Jobs' answers on a real Slurm cluster are kept as on the simulated fleet.

``trainctl lab slurm up --nodes 4`` and four real ``sbatch --requeue`` jobs, one a node, whose
``--comment`` says: ``ckpt=10m`` (waits for a checkpoint past the 40 s drain deadline),
``ckpt=20s`` (waits for a checkpoint before it), ``evict=refuse``, and ``ckpt=20s`` with keys
trainctl cannot read. One domain takes all four nodes. Each job's eviction, as an offset from
its question, is compared with what the simulated fleet's job of the same behaviour gets from
the same drain rules (``drain_step``, ``DrainTracker``, ``sim_negotiation.answer``) at the same
instants; the unreadable keys leave a ``job_comment_ignored`` event and nothing else.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.job_comment import parse_job_comment
from orchestrator.contracts.messages import JobReply, JobWait
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput
from orchestrator.contracts.views import JobView, last_checkpoint, next_checkpoint
from orchestrator.execution.drain import DrainTracker
from orchestrator.fleet import open_backend
from orchestrator.fleet import sim_negotiation as simjobs
from orchestrator.fleet.sim_records import JobRec
from orchestrator.lab.slurm import LabInfo, lab_down
from orchestrator.planning import train_plan
from tests.e2e import audit_ok, terminate, wait_for
from tests.test_slurm_e2e import TARGETS, slurm
from tests.test_slurm_ops import init_fleet, lab_up
from workflows.cluster_train import ClusterTrain

MAX_WAIT_S = 40.0
#: comment -> the simulated fleet's behaviour for the same words
JOBS = {
    "ckpt=10m": "checkpoint",
    "ckpt=20s": "checkpoint",
    "evict=refuse": "refuse",
    "ckpt=20s bogus=1 evict=maybe": "checkpoint",
}
LIMIT_MIN = 10
#: Answers that run past the deadline: the job is requeued at it, not at once.
HELD_TO_DEADLINE = ("ckpt=10m", "evict=refuse")


@pytest.fixture
def lab4(tmp_home: Path) -> Iterator[LabInfo]:
    """A lab of four nodes, as the Slurm operation tests start theirs; down whatever happened."""
    try:
        yield lab_up(tmp_home, "--nodes", "4")
    finally:
        lab_down(tmp_home)


def _submit(lab: LabInfo, comment: str) -> int:
    out = slurm(
        lab, "sbatch", "--parsable", "--requeue", "-N1", f"-t{LIMIT_MIN}",
        f"--comment={comment}", "-o/dev/null", f"--chdir={Path(lab.slurm_conf).parent}",
        f"--wrap=sleep {LIMIT_MIN * 60 - 30}",
    )  # fmt: skip
    return int(out.strip().split(";")[0])


def _simulated_offset(behaviour: str, comment: str, start: float, t: float) -> float:
    """Seconds from the question to the eviction a simulated job of ``behaviour`` gets when
    asked at fleet hour ``t``, from the drain rules a simulated run folds its answer with (a
    running job started by ``t``: Slurm's start, to the second, may read a moment later)."""
    end = start + LIMIT_MIN / 60
    start = min(start, t)
    ckpt = parse_job_comment(comment).ckpt_hours or (end - start)
    view = JobView(1, 1, ("n",), end, next_checkpoint(start, ckpt, t, end),
                   last_checkpoint(start, ckpt, t, end))  # fmt: skip
    deadline = t + MAX_WAIT_S / 3600
    step = train_plan.drain_step(view, t, deadline)
    wait = JobWait(
        job_id=1, hosts=["n"], action=step.action, at_hours=step.at_hours,
        final_hours=train_plan.final_stop(view, t, deadline), refusals=0,
        last_checkpoint_hours=view.last_checkpoint_hours,
    )  # fmt: skip
    tracker = DrainTracker(deadline, negotiate=True, release=True)
    asked = tracker.decide([wait], t).ask
    rec = JobRec(1, 1, end - start, ckpt, start, start=start)
    a = simjobs.answer(behaviour, rec, t)
    tracker.heard({1: JobReply(answer=a.answer, until_hours=a.until_hours)}, asked, t)
    evict_at = tracker.talks[1].evict_at
    assert evict_at is not None
    return (evict_at - t) * 3600


def _starts(lab: LabInfo, anchor: float) -> dict[int, float]:
    """job -> its start in fleet hours (``squeue %S``, local time)."""
    out = {}
    for line in slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i|%S").split():
        job, start = line.split("|")
        out[int(job)] = (datetime.fromisoformat(start).timestamp() - anchor) / 3600
    return out


def _cordoned_at(events: list[Any], hosts: list[str], before: float) -> float:
    """The fleet hour the last of ``hosts`` was cordoned before ``before`` (its drain's start)."""
    return max(
        e.t
        for e in events
        if e.kind == "host_state"
        and e.host in hosts
        and e.detail.get("after") == "cordoned"
        and e.t <= before
    )


def _events(path: Path) -> list[Any]:
    fleet = open_backend(path)
    try:
        return [e for _, e, _ in fleet.records()]
    finally:
        fleet.close()  # type: ignore[attr-defined]


async def test_job_answers_on_slurm_are_kept_as_on_the_simulated_fleet(
    dev_env, tmp_home, task_queue, lab4
):
    """Each job is evicted within 10 s of the simulated fleet's instant for its answer (the
    wait and the refusal at the 40 s deadline, not at once); the unreadable keys leave an event
    and the job behaves as its readable words say."""
    lab = lab4
    jobs = {_submit(lab, c): c for c in JOBS}
    path = init_fleet(lab)
    fleet = open_backend(path)
    anchor = fleet.anchor_wall.timestamp()  # type: ignore[attr-defined]
    fleet.close()  # type: ignore[attr-defined]
    starts = await wait_for(
        lambda: (s := _starts(lab, anchor)) and len(s) == len(jobs) and s, "the jobs to start"
    )
    # A job asked within a second of its start has "just checkpointed" (its start) and goes at
    # once on either fleet; past that second each answer is what the comment says.
    latest = max(starts.values()) * 3600 + anchor
    await wait_for(lambda: time.time() > latest + 2.0, "every job past its start's second")
    spec = TrainSpec.model_validate(
        {"cluster": lab.cluster, "domain_size": 4, "budget": {"max_unavailable": 4},
         "drain": {"max_wait": f"{MAX_WAIT_S:.0f}s"}, "targets": TARGETS}
    )  # fmt: skip
    await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    done = lambda: sum(e.kind == "job_interrupted" for e in _events(path)) >= len(jobs)  # noqa: E731
    async with build_worker(dev_env.client, path, task_queue):
        handle = await dev_env.client.start_workflow(
            ClusterTrain.run, TrainInput(spec=spec),
            id=f"train-lab-answers-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
        )  # fmt: skip
        try:
            await wait_for(lambda: asyncio.to_thread(done), "every job evicted", 150, every=1)
        finally:
            await terminate(dev_env, handle.id)
            await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    events = _events(path)
    asked = {e.detail["job"]: e for e in events if e.kind == "job_asked"}
    evicted = {e.detail["job"]: e for e in events if e.kind == "job_interrupted"}
    for job, comment in jobs.items():
        t = asked[job].t
        live = (evicted[job].t - t) * 3600
        sim = _simulated_offset(JOBS[comment], comment, starts[job], t)
        print(f"{comment!r}: slurm {live:.1f}s, simulated {sim:.1f}s, {asked[job].detail}")
        assert abs(live - sim) <= 10.0, (comment, live, sim, asked[job].detail)
        if comment in HELD_TO_DEADLINE:  # its answer runs past max_wait: kept to the deadline
            # The deadline runs from the cordon of its hosts (on a loaded machine the first ask
            # can come late, even past it): never evicted before it.
            cordoned = _cordoned_at(events, evicted[job].detail["hosts"], t)
            held = (evicted[job].t - cordoned) * 3600
            assert held >= MAX_WAIT_S - 5.0, (comment, held, asked[job].detail)
    ignored = [e.detail for e in events if e.kind == "job_comment_ignored"]
    bad = next(j for j, c in jobs.items() if "bogus" in c)
    assert ignored and {d["job"] for d in ignored} == {bad}, ignored
    assert ignored[0]["ignored"] == ["bogus=1", "evict=maybe"]
    audit_ok(path)
