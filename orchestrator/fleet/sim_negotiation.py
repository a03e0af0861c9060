"""How simulated jobs answer when maintenance asks to evict them (the scheduler's side of
job negotiation, ``orchestrator.execution.negotiation``).

Each job of the trace has one behaviour for its whole life (requeues keep it), drawn by size
from its own named draw (so adding it changed no other draw of the trace), or pinned in
``ClusterState.job_behaviours`` (tests, or an operator who knows a job):

- ``go``: "go ahead". Development, evaluation and fine-tuning jobs of a few hosts: they restart
  in minutes and their owners would rather lose a little work than wait.
- ``checkpoint``: "wait for my next checkpoint". The common case for training jobs, which
  checkpoint every 30 min to 2 h and lose nothing when stopped right after one.
- ``finish``: "I end in less than ``FINISH_HORIZON_HOURS``, wait for my end" (else it answers
  like ``checkpoint``): jobs near their end whose owners know it better than a time limit.
- ``refuse``: "not now, ask me after my next checkpoint". Jobs in a phase an interruption
  would hurt (an evaluation sweep, a learning-rate warm-up being watched, a hero run before a
  deadline); mostly large pre-training jobs.

Shares by size (hosts): fewer than 8: go 60%, checkpoint 25%, finish 15%; 8 to 63: go 20%,
checkpoint 55%, finish 15%, refuse 10%; 64 and more: checkpoint 70%, finish 10%, refuse 20%.
These are assumptions, not measurements: Meta's posts say job owners may delay maintenance
within limits (Twine's TaskControl) but publish no mix; small jobs are the ones that most often
accept an interruption, large synchronous jobs the ones that most often push back.
"""

from __future__ import annotations

import functools

from orchestrator.contracts.backend import JobAnswer
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.sim_records import JobRec

BEHAVIOURS = ("go", "checkpoint", "finish", "refuse")
#: (smallest job size in hosts, weights of BEHAVIOURS), largest size class first.
MIX: tuple[tuple[int, tuple[int, int, int, int]], ...] = (
    (64, (0, 70, 10, 20)),
    (8, (20, 55, 15, 10)),
    (1, (60, 25, 15, 0)),
)
#: A ``finish`` job waits for its end only when it ends within this many hours.
FINISH_HORIZON_HOURS = 2.0
#: Stop this long after a checkpoint, so it is complete (as the drain policy does).
CHECKPOINT_SLACK_HOURS = 1.0 / 3600.0


def draw_behaviour(seed: int, cluster: str, job_id: int, size: int) -> str:
    """The behaviour of job ``job_id`` of ``size`` hosts (one named draw per job)."""
    weights = next(w for least, w in MIX if size >= least)
    r = dyn.rng(seed, cluster, "negotiation", job_id)
    return r.choices(BEHAVIOURS, weights)[0]


@functools.lru_cache(maxsize=1 << 16)
def behaviour_of(seed: int, cluster: str, job_id: int, size: int) -> str:
    """``draw_behaviour``, remembered: a job keeps its behaviour for life, and plans read it
    for every running job at every look."""
    return draw_behaviour(seed, cluster, job_id, size)


def answer(behaviour: str, job: JobRec, now: float) -> JobAnswer:
    """What a job with ``behaviour`` answers at fleet hour ``now``."""
    if behaviour == "go":
        return JobAnswer("go", reason="go ahead")
    after_ckpt = job.next_checkpoint(now) + CHECKPOINT_SLACK_HOURS
    if behaviour == "refuse":
        return JobAnswer("refuse", after_ckpt, "not now: ask after my next checkpoint")
    if behaviour == "finish" and job.end - now <= FINISH_HORIZON_HOURS:
        return JobAnswer("wait", job.end, "wait for my end")
    if now - job.last_checkpoint(now) <= CHECKPOINT_SLACK_HOURS:
        return JobAnswer("go", reason="checkpoint just written")
    return JobAnswer("wait", after_ckpt, "wait for my next checkpoint")
