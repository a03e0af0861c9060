"""Pure planning for maintenance trains: which hosts to take next, and how to drain them.

The Temporal train (through an activity) and the discrete-event simulator call these same
functions on plain snapshots, so what the simulator measures is what the daemon does. Nothing
here does I/O or reads a clock: time is an argument in fleet hours.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

IN_SERVICE = "in_service"
REPAIR_RETURN = "repair-return"
POLICIES = ("job-aware", "rolling-serial", "drain-wait", "slurm-asap")


@dataclass(frozen=True)
class HostView:
    """What the planner needs to know about one host."""

    name: str
    rack: str
    zone: str
    state: str
    owner: str
    job_id: int | None
    due: bool  # not yet visited this cycle (or has pending updates after a repair)


@dataclass(frozen=True)
class JobView:
    id: int
    size: int
    hosts: tuple[str, ...]
    end_hours: float
    next_checkpoint_hours: float
    last_checkpoint_hours: float


@dataclass(frozen=True)
class BudgetView:
    """Limits in force: hosts out of service in the cluster, per rack and per zone."""

    limit: int
    per_rack: int | None = None
    per_zone: int | None = None


@dataclass
class DomainPlan:
    hosts: list[str] = field(default_factory=list)
    waiting: str = ""  # why nothing (or less than asked) was taken


@dataclass(frozen=True)
class DrainStep:
    """What to do about a job on a cordoned host: wait until ``at``, then maybe evict."""

    action: str  # "wait_end" | "evict_after_checkpoint" | "evict_now"
    at_hours: float


class _Room:
    """Budget headroom, tracked as hosts are added to a plan."""

    def __init__(self, hosts: Sequence[HostView], budget: BudgetView) -> None:
        self.budget = budget
        down = [h for h in hosts if h.state != IN_SERVICE]
        self.total = len(down)
        self.rack = Counter(h.rack for h in down)
        self.zone = Counter(h.zone for h in down)

    def fits(self, h: HostView) -> bool:
        if h.state != IN_SERVICE:
            return True  # already out of service: taking it costs no extra budget
        b = self.budget
        return (
            self.total < b.limit
            and (b.per_rack is None or self.rack[h.rack] < b.per_rack)
            and (b.per_zone is None or self.zone[h.zone] < b.per_zone)
        )

    def take(self, h: HostView) -> None:
        if h.state == IN_SERVICE:
            self.total += 1
            self.rack[h.rack] += 1
            self.zone[h.zone] += 1


def choose_domain(
    hosts: Sequence[HostView],
    jobs: Mapping[int, JobView],
    now: float,
    budget: BudgetView,
    slots: int,
    max_wait_hours: float,
    policy: str = "job-aware",
) -> DomainPlan:
    """Pick up to ``slots`` due hosts to take out next without breaking the budget.

    ``job-aware`` takes, in order: repaired hosts waiting for updates (already out, free of
    budget), idle hosts, then whole jobs that end within the drain window, then whole jobs by
    size, so that one interruption covers as many hosts as possible. The baselines take hosts in
    plain host order, as the tools they model do.
    """
    plan = DomainPlan()
    if slots <= 0:
        plan.waiting = "domain full"
        return plan
    room = _Room(hosts, budget)
    due = [h for h in hosts if h.due and (h.state == IN_SERVICE or h.owner == REPAIR_RETURN)]
    if not due:
        plan.waiting = "no host due"
        return plan
    taken: set[str] = set()

    def add(h: HostView) -> bool:
        if len(plan.hosts) >= slots or h.name in taken or not room.fits(h):
            return False
        room.take(h)
        taken.add(h.name)
        plan.hosts.append(h.name)
        return True

    if policy == "job-aware":
        for h in due:
            if h.state != IN_SERVICE:
                add(h)
        for h in due:
            if h.job_id is None:
                add(h)
        by_job: dict[int, list[HostView]] = {}
        for h in due:
            if h.job_id is not None and h.state == IN_SERVICE:
                by_job.setdefault(h.job_id, []).append(h)

        def job_key(jid: int) -> tuple[int, float, int]:
            j = jobs[jid]
            ends_soon = j.end_hours - now <= max_wait_hours
            return (0 if ends_soon else 1, j.end_hours if ends_soon else j.size, jid)

        for jid in sorted(by_job, key=job_key):
            group = by_job[jid]
            free = slots - len(plan.hosts)
            if free <= 0:
                break
            if len(group) <= free:
                for h in group:
                    add(h)
            elif not plan.hosts:
                # Nothing smaller fits: take as much of this job as we can so the cycle moves.
                for h in group:
                    add(h)
    else:
        for h in due:
            add(h)
    if not plan.hosts:
        plan.waiting = "budget exhausted" if not any(room.fits(h) for h in due) else "waiting"
    return plan


def drain_step(job: JobView, now: float, deadline: float, policy: str = "job-aware") -> DrainStep:
    """When to stop waiting for a job on a cordoned host, and whether to evict it.

    ``job-aware`` waits for the job to end if it ends by the deadline, otherwise evicts right
    after its next checkpoint (losing almost no work), or at the deadline if no checkpoint comes
    first. ``rolling-serial`` evicts at once; ``drain-wait`` waits to the deadline then evicts;
    ``slurm-asap`` waits for the job to end, with no deadline.
    """
    if policy == "rolling-serial":
        return DrainStep("evict_now", now)
    if policy == "slurm-asap":
        return DrainStep("wait_end", job.end_hours)
    if job.end_hours <= deadline:
        return DrainStep("wait_end", job.end_hours)
    if policy == "drain-wait":
        return DrainStep("evict_now", deadline)
    ckpt = job.next_checkpoint_hours if job.next_checkpoint_hours > now else now
    if ckpt <= deadline:
        return DrainStep("evict_after_checkpoint", ckpt)
    return DrainStep("evict_now", deadline)
