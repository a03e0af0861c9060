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

from orchestrator.contracts.backend import ClusterBackend, RefusalNote
from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.messages import (
    AskResult,
    DrainStatus,
    EvictResult,
    JobReply,
    JobWait,
)
from orchestrator.contracts.models import HostState
from orchestrator.execution import negotiation
from orchestrator.planning import quiet, train_plan

#: Fleet hours treated as "now" when comparing instants (float noise of scaled clocks).
EPSILON_HOURS = 1e-6
#: Policies whose drains hand a refusing job's hosts back (``DrainTracker.release``); the
#: baselines model tools that hold what they cordoned.
RELEASE_POLICIES = frozenset({"job-aware"})
#: A job taken again this soon after its checkpoint has "just checkpointed" (``_again``): the
#: train comes back at the instant the job named (its checkpoint and a second), but the live
#: train's activities take a few moments of fleet time to get there; stopping it then loses
#: at most this much of its work, against holding its hosts for a whole checkpoint interval.
REASKED_SLACK_HOURS = 0.01


def drain_status(
    b: ClusterBackend,
    owner: str,
    hosts: Iterable[str],
    deadline_hours: float,
    policy: str,
    cycle_target_hours: float | None = None,
) -> DrainStatus:
    """Which of ``owner``'s held hosts are ready, which were lost, what to do about each job.

    A job in its quiet hours is not evicted before they end, or before its hosts' deadline
    (last visit plus ``cycle_target_hours``) when that comes first (``planning.quiet``)."""
    out = DrainStatus(fleet_hours=b.now)
    jobs: dict[int, list[str]] = {}
    notes = b.refusal_notes()
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
        final = train_plan.final_stop(job, b.now, deadline_hours, policy)
        note = notes.get(job_id)
        forced_at = quiet.host_deadline(
            (b.host(h).last_visit for h in job.hosts), cycle_target_hours
        )
        held = quiet.hold(job, b.now, forced_at)
        until = None if held is None else held.until_hours
        at = step.at_hours if step.action == "wait_end" else quiet.not_before(step.at_hours, until)
        out.waits.append(
            JobWait(
                job_id=job_id,
                hosts=names,
                action=step.action,
                at_hours=at,
                final_hours=final,
                refusals=0 if note is None else note.refusals,
                last_checkpoint_hours=job.last_checkpoint_hours,
                quiet_until_hours=until,
                quiet_forced=held is not None and held.forced,
            )
        )
    return out


def refusing_hosts(b: ClusterBackend, hosts: Iterable[str]) -> set[str]:
    """Of ``hosts``, those whose job refused a drain that handed them back and may not be asked
    again yet (its ``RefusalNote``): a planner leaves them until then."""
    notes = b.refusal_notes()
    out = set()
    for name in hosts:
        job = b.host(name).job_id
        note = notes.get(job) if job is not None else None
        if note is not None and note.until_hours > b.now + EPSILON_HOURS:
            out.add(name)
    return out


def evict_jobs(
    b: ClusterBackend,
    owner: str,
    job_ids: Iterable[int],
) -> EvictResult:
    """Evict each job; a job already gone is skipped (idempotent on retry). The question
    comes first, in its own step (``ask_jobs``), when the drain negotiates.

    Only a job that still runs on a host ``owner`` holds is evicted: one evicted by another
    domain meanwhile may have been requeued and restarted elsewhere under the same id, and
    stopping it again would interrupt a job on hosts that are not ours, for nothing.
    """
    out = EvictResult()
    for job_id in job_ids:
        job = b.job(job_id)
        if job is None or not any(b.host(h).owner == owner for h in job.hosts):
            continue  # ended, evicted by an earlier attempt, or restarted on others' hosts
        q = job.quiet_until_hours
        if q is not None and b.now + EPSILON_HOURS < q:
            # A drain decides an eviction inside quiet hours only when the host's deadline
            # forces it (``planning.quiet``): the record says so.
            b.record(
                owner,
                "quiet_job_evicted",
                None,
                job=job_id,
                quiet_until=round(q, 4),
                reason="its hosts' deadline (last visit plus cycle_target) came first",
            )
        out.lost_gpu_hours += b.evict(job_id, owner)
        out.interrupted += 1
    return out


def ask_jobs(
    b: ClusterBackend,
    owner: str,
    planned: dict[int, float],
    deadline_hours: float,
    max_refusals: int,
    refusals: dict[int, int] | None = None,
    finals: dict[int, float] | None = None,
    release: bool = False,
) -> AskResult:
    """Ask each job still running on ``owner``'s hosts before evicting it at its ``planned``
    instant; record the question, the answer and what it leads to (``negotiation.resolve``).

    ``release``: the drain hands a refusing job's hosts back (``DrainTracker.release``): the
    refusals it made to earlier visits count, and a refusal this visit honours is noted with
    the fleet (``note_refusal``), so the planner leaves the job alone until it may be asked
    again and the next visit goes on counting."""
    out = AskResult(fleet_hours=b.now)
    notes = b.refusal_notes() if release else {}
    for job_id, at in sorted(planned.items()):
        job = b.job(job_id)
        if job is None or not any(b.host(h).owner == owner for h in job.hosts):
            continue
        a = b.ask_job(job_id, owner, at)
        reply = JobReply(answer=a.answer, until_hours=a.until_hours, reason=a.reason)
        note = notes.get(job_id)
        prior = max((refusals or {}).get(job_id, 0), 0 if note is None else note.refusals)
        before = negotiation.Talk(refusals=prior)
        talk = negotiation.resolve(
            before,
            a.answer,
            a.until_hours,
            a.reason,
            b.now,
            deadline_hours,
            max_refusals,
            at,
            (finals or {}).get(job_id),
        )
        if release and talk.ask_at is not None:
            b.note_refusal(job_id, RefusalNote(talk.ask_at, talk.refusals))
        b.record(
            owner,
            "job_asked",
            None,
            job=job_id,
            hosts=len(job.hosts),
            evict_at=round(at, 4),
            answer=a.answer,
            until=None if a.until_hours is None else round(a.until_hours, 4),
            reason=a.reason,
            refusals=talk.refusals,
            then_evict_at=None if talk.evict_at is None else round(talk.evict_at, 4),
            then_ask_at=None if talk.ask_at is None else round(talk.ask_at, 4),
        )
        out.answers[job_id] = reply
    return out


def _question(w: JobWait, now: float) -> float:
    """The eviction instant a job is asked about: right after its next checkpoint when the
    policy times it so (job-aware), else now (a policy that would wait only in case the job
    ends, or would not wait at all); a "go ahead" takes effect then; never inside the job's
    quiet hours."""
    at = max(w.at_hours, now) if w.action == "evict_after_checkpoint" else now
    return quiet.not_before(at, w.quiet_until_hours)


def _again(w: JobWait, now: float) -> float:
    """When a job whose refusals to earlier visits are spent is stopped: at once if it has just
    checkpointed (the train came back when it said, right after its checkpoint; give or take
    the moments an activity takes), else as the policy times it (``_question``)."""
    last = w.last_checkpoint_hours
    if last is not None and 0.0 <= now - last <= REASKED_SLACK_HOURS:
        return now
    return _question(w, now)


@dataclass
class DrainDecision:
    """What to do after one look: evict these jobs now, else sleep until ``wake_at_hours``."""

    evict: list[int] = field(default_factory=list)
    #: job -> the fleet hour the eviction was decided for (what ``evict_jobs`` takes)
    scheduled_hours: dict[int, float] = field(default_factory=dict)
    wake_at_hours: float | None = None
    #: jobs to ask before evicting them (negotiating drains), with the planned instant told
    ask: dict[int, float] = field(default_factory=dict)
    #: job -> its hosts to hand back untouched: it refused, and will be asked again later
    #: (``DrainTracker.release``); they leave this drain
    release: dict[int, list[str]] = field(default_factory=dict)


@dataclass
class DrainTracker:
    """Evictions decided so far for one set of held hosts with one drain deadline.

    A negotiating tracker (``negotiate``) asks each job before evicting it (``DrainDecision.ask``)
    and folds the answers in with ``heard``, as ``negotiation.resolve`` says.

    A releasing one (``release``, with ``negotiate``) does not hold a job's hosts while it
    refuses: a refusal it honours hands them back at once (``DrainDecision.release``), so the
    budget goes to hosts that can be drained now; the refusal is noted with the fleet
    (``ask_jobs``), the planner takes the job's hosts again once it may be asked again, and that
    visit counts on from the refusals so far (``JobWait.refusals``). Once they are spent the
    job is stopped at the policy's instant (job-aware: right after its next checkpoint), not at
    the last checkpoint before the deadline: holding the budget longer buys the job nothing it
    was not already refused. A refusing job's hosts are still visited in the cycle: then, or
    when the job ends or fails first (piggybacked)."""

    deadline_hours: float
    scheduled: dict[int, float] = field(default_factory=dict)
    negotiate: bool = False
    max_refusals: int = negotiation.DEFAULT_MAX_REFUSALS
    talks: dict[int, negotiation.Talk] = field(default_factory=dict)
    #: job -> when the deadline rules for it, from the latest look (``JobWait.final_hours``)
    finals: dict[int, float] = field(default_factory=dict)
    release: bool = False
    #: job -> refusals it made to earlier visits (``JobWait.refusals``), releasing trackers
    prior: dict[int, int] = field(default_factory=dict)

    def heard(self, answers: dict[int, JobReply], planned: dict[int, float], now: float) -> None:
        """Fold the answers to one round of questions into each job's negotiation."""
        for job_id, a in answers.items():
            talk = self.talks.get(job_id, negotiation.Talk(refusals=self.prior.get(job_id, 0)))
            self.talks[job_id] = negotiation.resolve(
                talk,
                a.answer,
                a.until_hours,
                a.reason,
                now,
                self.deadline_hours,
                self.max_refusals,
                planned.get(job_id, now),
                self.finals.get(job_id),
            )
        for job_id in planned:  # gone before it could answer: nothing to wait for
            self.talks.setdefault(job_id, negotiation.Talk(answer="gone", evict_at=now))

    def decide(self, waits: Sequence[JobWait], now: float) -> DrainDecision:
        """Evict what is due now; otherwise remember the planned evictions and say when to wake."""
        running = {w.job_id for w in waits}
        self.scheduled = {j: t for j, t in self.scheduled.items() if j in running}
        if self.negotiate:
            self.talks = {j: t for j, t in self.talks.items() if j in running}
            self.finals = {w.job_id: w.final_hours for w in waits if w.final_hours is not None}
            if self.release:
                self.prior = {w.job_id: w.refusals for w in waits if w.refusals}
                for w in waits:
                    if w.refusals and w.action != "wait_end":
                        q = _again(w, now)
                        self.finals[w.job_id] = min(self.finals.get(w.job_id, q), q)
            return self._negotiated(waits, now)
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

    def _negotiated(self, waits: Sequence[JobWait], now: float) -> DrainDecision:
        """``decide`` for a negotiating drain: a job the policy would evict is asked first
        (told the policy's instant); its answer then sets when it is evicted or asked again."""
        due = now + EPSILON_HOURS
        evict: dict[int, float] = {}
        ask: dict[int, float] = {}
        release: dict[int, list[str]] = {}
        wake = math.inf
        for w in waits:
            talk = self.talks.get(w.job_id)
            if self.release and talk is not None and talk.ask_at is not None:
                release[w.job_id] = list(w.hosts)
                continue
            if talk is None:
                if w.action == "wait_end":  # it ends by itself in time: nothing to ask
                    wake = min(wake, w.at_hours)
                else:
                    ask[w.job_id] = _question(w, now)
            elif talk.evict_at is not None:
                at = quiet.not_before(talk.evict_at, w.quiet_until_hours)
                if at <= due:
                    evict[w.job_id] = at
                else:
                    wake = min(wake, at)
            elif talk.ask_at is not None:
                if talk.ask_at <= due:
                    ask[w.job_id] = _question(w, now)
                else:
                    wake = min(wake, talk.ask_at)
        if release:
            for job_id in release:
                self.talks.pop(job_id, None)
            return DrainDecision(release=release)
        if evict:
            return DrainDecision(evict=sorted(evict), scheduled_hours=evict)
        if ask:
            return DrainDecision(ask=ask)
        if not waits:
            return DrainDecision()
        if self.deadline_hours > due:
            wake = min(wake, self.deadline_hours)
        return DrainDecision(wake_at_hours=max(wake, due))

    def describe(self) -> dict[str, str]:
        """job -> its negotiation in one line (for the UI, status queries and logs)."""
        return {str(j): t.describe() for j, t in sorted(self.talks.items())}
