"""Draining held hosts: what each job on them should do, and when to look again.

Two halves, one definition each. ``drain_status`` (over the backend, inside one transaction) says
which held hosts are free of jobs, which left our hands, and what the drain policy
(``planning.train_plan.drain_step``) says about each job still running. ``DrainTracker`` (pure,
deterministic: it runs inside workflows) turns successive statuses into evictions and wake-ups:
it remembers the instant it decided to evict each job at, so a checkpoint-timed eviction happens
at that checkpoint even if a later look would pick the next one, and forgets a job as soon as it
is gone (ended or evicted), so a stale decision never wakes anyone. The train's domains, the bulk
operation's waves and the simulator all drain through these two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from orchestrator.constants import HELD_STATES
from orchestrator.execution.messages import DrainStatus, EvictResult, JobWait
from orchestrator.fleet.backend import ClusterBackend
from orchestrator.models import HostState
from orchestrator.planning import train_plan

#: Fleet hours treated as "now" when comparing instants (float noise of scaled clocks).
EPSILON_HOURS = 1e-6


def drain_status(
    b: ClusterBackend, owner: str, hosts: Iterable[str], deadline_hours: float, policy: str
) -> DrainStatus:
    """Which of ``owner``'s held hosts are ready, which were lost, what to do about each job."""
    out = DrainStatus(fleet_hours=b.now)
    jobs: dict[int, list[str]] = {}
    for name in hosts:
        h = b.host(name)
        if h.owner != owner or h.state not in HELD_STATES:
            lost = f"{h.state}: {h.reason}" if h.state != HostState.IN_SERVICE else "released"
            out.lost[name] = lost
        elif h.job_id is None:
            out.ready.append(name)
        else:
            b.start_drain(name, owner)
            jobs.setdefault(h.job_id, []).append(name)
    for job_id, names in sorted(jobs.items()):
        job = b.job(job_id)
        if job is None:  # pragma: no cover - a host's job is running by construction
            continue
        step = train_plan.drain_step(job, b.now, deadline_hours, policy)
        out.waits.append(
            JobWait(job_id=job_id, hosts=names, action=step.action, at_hours=step.at_hours)
        )
    return out


def evict_jobs(
    b: ClusterBackend,
    owner: str,
    job_ids: Iterable[int],
    scheduled_hours: dict[int, float] | None = None,
    logical_clock: bool = False,
) -> EvictResult:
    """Ask each job, then evict it; a job already gone is skipped (idempotent on retry).

    Only a job that still runs on a host ``owner`` holds is evicted: one evicted by another
    domain meanwhile may have been requeued and restarted elsewhere under the same id, and
    stopping it again would interrupt a job on hosts that are not ours, for nothing.

    Under a logical clock other waiters may have moved time past the checkpoint an eviction was
    planned for (``scheduled_hours``): it then takes effect as planned.
    """
    out = EvictResult()
    for job_id in job_ids:
        job = b.job(job_id)
        if job is None or not any(b.host(h).owner == owner for h in job.hosts):
            continue  # ended, evicted by an earlier attempt, or restarted on others' hosts
        planned = (scheduled_hours or {}).get(job_id)
        answer = b.ask_job(job_id, owner, b.now if planned is None else planned)
        if answer.answer != "go":
            out.deferred[job_id] = answer.reason or answer.answer
            continue
        out.lost_gpu_hours += b.evict(job_id, owner, as_of=planned if logical_clock else None)
        out.interrupted += 1
    return out


@dataclass
class DrainDecision:
    """What to do after one look: evict these jobs now, else sleep until ``wake_at_hours``."""

    evict: list[int] = field(default_factory=list)
    #: job -> the fleet hour the eviction was decided for (what ``evict_jobs`` takes)
    scheduled_hours: dict[int, float] = field(default_factory=dict)
    wake_at_hours: float | None = None


@dataclass
class DrainTracker:
    """Evictions decided so far for one set of held hosts with one drain deadline."""

    deadline_hours: float
    scheduled: dict[int, float] = field(default_factory=dict)

    def decide(self, waits: Sequence[JobWait], now: float) -> DrainDecision:
        """Evict what is due now; otherwise remember the planned evictions and say when to wake."""
        running = {w.job_id for w in waits}
        self.scheduled = {j: t for j, t in self.scheduled.items() if j in running}
        due = now + EPSILON_HOURS
        evict = [
            w.job_id
            for w in waits
            if (w.action == "evict_now" and w.at_hours <= due)
            or self.scheduled.get(w.job_id, math.inf) <= due
        ]
        if evict:
            planned = {j: self.scheduled.pop(j) for j in evict if j in self.scheduled}
            return DrainDecision(evict=evict, scheduled_hours=planned)
        if not waits:
            return DrainDecision()
        for w in waits:
            if w.action != "wait_end":
                self.scheduled.setdefault(w.job_id, w.at_hours)
        wake = min(min(self.scheduled.get(w.job_id, w.at_hours), w.at_hours) for w in waits)
        if self.deadline_hours > now + EPSILON_HOURS:
            # The deadline bounds the wait while it lies ahead; past it the policy has spoken
            # (evict now, or, for slurm-asap, wait for the end however long).
            wake = min(wake, self.deadline_hours)
        return DrainDecision(wake_at_hours=max(wake, now + EPSILON_HOURS))
