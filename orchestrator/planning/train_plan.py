"""Pure planning for maintenance trains: which hosts to take next, and how to drain them.

The Temporal train (through an activity) and the discrete-event simulator call these same
functions on plain snapshots, so what the simulator measures is what the daemon does. Nothing
here does I/O or reads a clock: time is an argument in fleet hours.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter

from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.models import HostState
from orchestrator.contracts.ui_text import BUDGET_EXHAUSTED
from orchestrator.contracts.views import HostView, JobView, last_checkpoint
from orchestrator.planning.blockers import budget_holders

IN_SERVICE = HostState.IN_SERVICE
_STATE, _DUE = attrgetter("state"), attrgetter("due")
DRAINING = HostState.DRAINING

#: job-aware: a job that ends within this many hours is waited for rather than evicted.
END_WAIT_HOURS = 0.25
#: job-aware: evict a job only when its hosts fill at least this fraction of the maintenance
#: domain (or of the hosts left to visit, near the end), since an interruption costs the same
#: whatever the number of hosts it frees; smaller pickings wait for slots to accumulate, unless
#: no job has that many due hosts left (then waiting would hold the budget idle for nothing).
#: With jobs steered to visited hosts (``PiggybackClaim.visited_first``), waiting for a fuller
#: eviction costs less (idle due hosts keep the pipeline fed meanwhile). On meta-24k at a 3%
#: budget, seeds 1-5 and 7-12 (`simulate` defaults), mean makespan / bound, interruptions in
#: all, and seeds meeting both issue-13 goals: 0.3 1.073x, 150, 2; 0.45 1.088x, 131, 2;
#: 0.6 1.108x, 104, 5; 0.75 1.135x, 74, 5 (0.58-0.75 all pass seeds 2-4; 0.55 loses seed 4).
EVICT_MIN_FILL = 0.6
#: job-aware behind its visit-cycle target (the cycle projected to end past ``cycle_target``):
#: the fill drops to this, so the train stops gathering for a full eviction and takes what it
#: can, trading interruptions for pace: the target is the commitment that every host is visited
#: in time. On meta-24k seeds 1-4 at a 3% budget with a 63 h target (1.05x the bound) makespan
#: / bound and interruptions went from 1.177x 16, 1.035x 1, 1.079x 2, 1.080x 4 to 1.089x 24,
#: 1.019x 3, 1.087x 6, 1.052x 4 (`bench_policy_seeds.py -- --cycle-target 63h`).
BEHIND_TARGET_EVICT_MIN_FILL = 0.15
#: Evict this long after a checkpoint, so the checkpoint is complete and nothing is lost.
CHECKPOINT_SLACK_HOURS = 1.0 / 3600.0


@dataclass(frozen=True)
class BudgetView:
    """Limits in force: hosts out of service in the cluster for any reason (``limit``, the
    floor), hosts held for planned work by every owner (``maintenance``; None: only the floor),
    per rack and per zone."""

    limit: int
    per_rack: int | None = None
    per_zone: int | None = None
    maintenance: int | None = None


@dataclass
class DomainPlan:
    hosts: list[str] = field(default_factory=list)
    waiting: str = ""  # why nothing (or less than asked) was taken
    retry_at_hours: float | None = None
    """When asking again may give more (a job comes within the wait window), if known."""


@dataclass(frozen=True)
class DrainStep:
    """What to do about a job on a cordoned host: wait until ``at``, then maybe evict."""

    action: str  # "wait_end" | "evict_after_checkpoint" | "evict_now"
    at_hours: float


class _Room:
    """Budget headroom, tracked as hosts are added to a plan."""

    def __init__(self, hosts: Sequence[HostView], budget: BudgetView) -> None:
        self.budget = budget
        # The few hosts out of service, picked at C speed (a snapshot has thousands of hosts).
        down = list(compress(hosts, map(IN_SERVICE.__ne__, map(_STATE, hosts))))
        self.down = down
        self.total = len(down)
        self.planned = sum(
            1 for h in down if h.state in HELD_STATES and h.owner not in NOT_MAINTENANCE_OWNERS
        )
        #: hosts held for planned work before this plan took any
        self.held = self.planned
        self.rack = Counter(h.rack for h in down)
        self.zone = Counter(h.zone for h in down)

    def free(self) -> int:
        """Hosts that may still be taken out under both the floor and the maintenance budget."""
        b = self.budget
        room = b.limit - self.total
        if b.maintenance is not None:
            room = min(room, b.maintenance - self.planned)
        return max(0, room)

    def fits(self, h: HostView) -> bool:
        if h.state != IN_SERVICE:
            return True  # already out of service: taking it costs no extra budget
        b = self.budget
        return (
            self.free() > 0
            and (b.per_rack is None or self.rack[h.rack] < b.per_rack)
            and (b.per_zone is None or self.zone[h.zone] < b.per_zone)
        )

    def take(self, h: HostView) -> None:
        if h.state == IN_SERVICE:
            self.total += 1
            self.planned += 1
            self.rack[h.rack] += 1
            self.zone[h.zone] += 1


class _Picker:
    """A plan being filled: up to ``slots`` hosts, each once and within the room's budget."""

    def __init__(self, plan: DomainPlan, slots: int, room: _Room) -> None:
        self.plan = plan
        self.slots = slots
        self.room = room
        self.taken: set[str] = set()

    def add(self, h: HostView) -> bool:
        if len(self.plan.hosts) >= self.slots or h.name in self.taken or not self.room.fits(h):
            return False
        self.room.take(h)
        self.taken.add(h.name)
        self.plan.hosts.append(h.name)
        return True

    def free(self) -> int:
        """Hosts the plan may still take: its slots left, within the budget."""
        return min(self.slots - len(self.plan.hosts), self.room.free())

    def take_job(self, groups: dict[int, list[HostView]], jid: int) -> None:
        """Take the due hosts of job ``jid`` (as many as fit) and forget the job."""
        for h in groups.pop(jid):
            self.add(h)


@dataclass(frozen=True)
class _EvictRules:
    """When job-aware planning stops a job (see ``_job_aware``)."""

    max_wait_hours: float
    refused: Mapping[int, float]
    min_fill: float
    evict: bool
    max_size: int | None


def choose_domain(
    hosts: Sequence[HostView],
    jobs: Mapping[int, JobView],
    now: float,
    budget: BudgetView,
    slots: int,
    max_wait_hours: float,
    policy: str = "job-aware",
    refused: Mapping[int, float] | None = None,
    evict_min_fill: float | None = None,
    evict: bool = True,
    max_evict_size: int | None = None,
) -> DomainPlan:
    """Pick up to ``slots`` due hosts to take out next without breaking the budget.

    A host is due if ``HostView.due`` says so and it is in service. ``job-aware`` takes idle
    hosts first and stops jobs only when worth it (``_job_aware``: ``refused`` jobs, the
    ``evict_min_fill`` (None: ``EVICT_MIN_FILL``), ``evict`` and ``max_evict_size`` rules).
    The baselines take due hosts in plain host order, as the tools they model do.
    """
    plan = DomainPlan()
    if slots <= 0:
        plan.waiting = "domain full"
        return plan
    room = _Room(hosts, budget)
    due = [h for h in compress(hosts, map(_DUE, hosts)) if h.state == IN_SERVICE]
    if not due:
        plan.waiting = "no host due"
        return plan
    pick = _Picker(plan, slots, room)
    if policy == "job-aware":
        fill = EVICT_MIN_FILL if evict_min_fill is None else evict_min_fill
        rules = _EvictRules(max_wait_hours, refused or {}, fill, evict, max_evict_size)
        _job_aware(pick, due, jobs, now, rules)
    else:
        for h in due:
            pick.add(h)
    if not plan.hosts and not plan.waiting:
        plan.waiting = "waiting" if any(room.fits(h) for h in due) else _exhausted(hosts)
    return plan


def _exhausted(hosts: Sequence[HostView]) -> str:
    """``budget exhausted: <who holds it>``: the hosts out of service, by holder."""
    return f"{BUDGET_EXHAUSTED}: {budget_holders(h for h in hosts if h.state != IN_SERVICE)}"


def _job_aware(
    pick: _Picker,
    due: list[HostView],
    jobs: Mapping[int, JobView],
    now: float,
    rules: _EvictRules,
) -> None:
    """Job-aware planning: take, in order, idle hosts; more hosts of jobs already being
    drained (they share the eviction); hosts of jobs that end within ``END_WAIT_HOURS`` (a
    short wait, no interruption); then whole jobs to evict right after their next checkpoint
    (``_evict_whole_jobs``).

    It evicts only for at least ``rules.min_fill`` of the domain (less for a train behind its
    cycle target) while other hosts are in flight (slots gather as they finish), unless no job
    has that many due hosts left (then the largest one is worth it), never evicts a job that
    ends within ``max_wait_hours`` while something else is in flight (it asks to be woken, in
    ``retry_at_hours``, when such a job comes within ``END_WAIT_HOURS`` of its end), and when
    nothing at all is in flight takes the best it can so the cycle always moves. It leaves
    alone the hosts of a job that ``refused`` (job -> when it may be asked again, from a drain
    that handed them back) until then, and asks to be woken then. With ``evict`` False (a train
    well ahead of its cycle target) it evicts no job at all, in flight or not, and leaves the
    rest to come free as jobs end or fail (the fleet piggybacks them for the train). With
    ``max_size`` it evicts no job of more hosts than that: a stop costs a restart paid by all
    the job's GPUs for the domain's worth of due hosts it frees, and a large job fails often
    (a 2,048-host one every ~3 h), handing its hosts to the train anyway.
    """
    plan = pick.plan
    not_now = {j: t for j, t in rules.refused.items() if t > now and j in jobs}
    groups = _take_idle(pick, due, jobs, not_now)
    later = _take_short_waits(pick, groups, jobs, now, rules.max_wait_hours, not_now)
    in_flight = pick.room.held + len(plan.hosts)  # held hosts are out of service: in the room
    if not rules.evict:  # ahead of the cycle target: jobs end or fail before we stop them
        if groups:
            plan.waiting = "ahead of the cycle target: evicting no job"
        return
    cap = in_flight + pick.free()
    if in_flight:
        for j in later:
            del groups[j]
    if rules.max_size is not None:  # a large job's due hosts come free as it fails or ends
        spared = [j for j in groups if jobs[j].size > rules.max_size]
        for j in spared:
            del groups[j]
        if spared and not groups:
            plan.waiting = "ahead of the cycle target: sparing large jobs"
    left = sum(map(len, groups.values()))
    need = max(1, math.ceil(rules.min_fill * min(cap, left)))
    if groups:
        # When no job can ever fill ``need``, gathering would only hold the budget idle.
        need = min(need, max(map(len, groups.values())))
    _evict_whole_jobs(pick, groups, jobs, now, rules.max_wait_hours, need, in_flight)


def _take_idle(
    pick: _Picker,
    due: list[HostView],
    jobs: Mapping[int, JobView],
    not_now: Mapping[int, float],
) -> dict[int, list[HostView]]:
    """One pass: idle due hosts are taken (in host order), the others grouped by job (which
    taking idle hosts does not change), but for jobs that said not now."""
    groups: dict[int, list[HostView]] = {}
    for h in due:
        jid = h.job_id
        if jid is None:
            pick.add(h)
        elif h.state == IN_SERVICE and jid in jobs and jid not in not_now:
            groups.setdefault(jid, []).append(h)
    return groups


def _take_short_waits(
    pick: _Picker,
    groups: dict[int, list[HostView]],
    jobs: Mapping[int, JobView],
    now: float,
    max_wait_hours: float,
    not_now: Mapping[int, float],
) -> list[int]:
    """Take the hosts of jobs already draining and of jobs that end within the wait window;
    the jobs that end within the drain window but not yet within the wait window, whose end
    the plan asks to be woken for (with a refusing job's next ask)."""
    plan = pick.plan
    draining = {h.job_id for h in pick.room.down if h.state == DRAINING and h.job_id is not None}
    for jid in sorted(draining & groups.keys()):
        pick.take_job(groups, jid)
    window = min(END_WAIT_HOURS, max_wait_hours)
    for jid in sorted(
        (j for j in groups if jobs[j].end_hours - now <= window), key=lambda j: jobs[j].end_hours
    ):
        pick.take_job(groups, jid)
    # Jobs that end within the drain window but not yet within the wait window: asking again
    # once they come within it turns an eviction into a short wait.
    later = [j for j in groups if jobs[j].end_hours - now <= max_wait_hours]
    if later:
        plan.retry_at_hours = min(jobs[j].end_hours for j in later) - window
    if not_now:  # ask again once a job that refused may be asked again
        again = min(not_now.values())
        plan.retry_at_hours = min(again, plan.retry_at_hours or again)
    return later


def _evict_whole_jobs(
    pick: _Picker,
    groups: dict[int, list[HostView]],
    jobs: Mapping[int, JobView],
    now: float,
    max_wait_hours: float,
    need: int,
    in_flight: int,
) -> None:
    """Take whole jobs to evict, the one covering most slots first (an interruption costs the
    same for 1 host or 92, so each should free as many due hosts as possible), the one whose
    hosts come free soonest on ties; while hosts are in flight, only one covering ``need``."""
    plan = pick.plan

    def wait(jid: int) -> float:
        """Hours until the job's hosts come free: its end if ``drain_step`` will wait for it,
        else its next checkpoint."""
        j = jobs[jid]
        if j.end_hours - now <= max_wait_hours:
            return max(0.0, j.end_hours - now)
        return max(0.0, j.next_checkpoint_hours - now)

    while groups:
        free = pick.free()
        if free <= 0:
            break
        best = max(groups, key=lambda j: (min(len(groups[j]), free), -wait(j), -j))
        if min(len(groups[best]), free) < need and in_flight:
            plan.waiting = "gathering slots for a job worth evicting"
            break
        before = len(plan.hosts)
        pick.take_job(groups, best)
        in_flight += len(plan.hosts) - before


def final_stop(job: JobView, now: float, deadline: float, policy: str = "job-aware") -> float:
    """When a job is stopped once the deadline rules (a negotiation's last word): job-aware
    stops it right after its last checkpoint before the deadline (``now`` if none is left to
    write after now), the others at the deadline."""
    interval = job.next_checkpoint_hours - job.last_checkpoint_hours
    if policy != "job-aware" or interval <= 0 or job.end_hours <= deadline:
        return deadline
    last = last_checkpoint(job.last_checkpoint_hours, interval, deadline) + CHECKPOINT_SLACK_HOURS
    if last > deadline:
        last -= interval
    if last - CHECKPOINT_SLACK_HOURS <= now:
        # That checkpoint is already written (its slack may still be running): none is left
        # ahead, so the negotiation holds the job to the deadline, never "a moment from now"
        # (a Slurm start read to the second put such a sliver between two equal drains).
        return now
    return min(deadline, last)


def drain_step(job: JobView, now: float, deadline: float, policy: str = "job-aware") -> DrainStep:
    """When to stop waiting for a job on a cordoned host, and whether to evict it.

    ``job-aware`` waits for the job to end if it ends by the deadline, otherwise evicts right
    after its next checkpoint (losing almost no work), or at the deadline if no checkpoint comes
    first; a job that has just checkpointed is evicted at once. ``rolling-serial`` evicts at
    once; ``drain-wait`` waits to the deadline then evicts; ``slurm-asap`` waits for the job to
    end, with no deadline.
    """
    if policy == "rolling-serial":
        return DrainStep("evict_now", now)
    if policy == "slurm-asap":
        return DrainStep("wait_end", job.end_hours)
    if job.end_hours <= deadline:
        return DrainStep("wait_end", job.end_hours)
    if policy == "drain-wait":
        return DrainStep("evict_now", deadline)
    if now - job.last_checkpoint_hours <= CHECKPOINT_SLACK_HOURS:
        return DrainStep("evict_now", now)
    ckpt = max(job.next_checkpoint_hours, now) + CHECKPOINT_SLACK_HOURS
    if ckpt <= deadline:
        return DrainStep("evict_after_checkpoint", ckpt)
    return DrainStep("evict_now", deadline)
