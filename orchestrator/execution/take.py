"""Taking the next hosts for a train: ask the shared planner, cordon what it chose, atomically.

Run inside one backend transaction, so every cordon re-checks the budget against the cluster as
it is now (a failure that landed since the snapshot is respected): the floor (hosts out for any
reason) and the maintenance budget (hosts held for planned work by every owner). Hosts the owner
holds but its caller does not know about (a retried activity that had committed before its
worker died, or hosts the fleet piggybacked for it when a job's end or failure freed them) are
handed back to the caller first, never forgotten. A job-aware train leaves its piggyback claim
with the fleet in the same transaction, renewed each time it plans.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter

from orchestrator.contracts.backend import ClusterBackend, PiggybackClaim
from orchestrator.contracts.constants import HELD_STATES, PIGGYBACK_NOTE, UNTOUCHED_STATES
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.execution.cycle import cycle_counts, project_cycle_end
from orchestrator.execution.take_rack import take_rack
from orchestrator.planning import train_plan
from orchestrator.planning.resting import (
    VisitRule,
    checkable,
    rest_note,
    rest_until,
    wants_visit,
)
from orchestrator.planning.rollout import (
    RolloutScope,
    covering_key,
    covering_targets,
    rollout_choices,
)


@dataclass
class Taken:
    hosts: list[str] = field(default_factory=list)
    waiting: str = ""
    retry_at_hours: float | None = None
    limit: int = 0
    counts: CycleCounts = field(default_factory=CycleCounts)
    asked: bool = False  # whether the planner was asked (there was room for more)
    maintenance: int = 0
    piggybacked: list[str] = field(default_factory=list)
    """Of ``hosts``, those the fleet had cordoned for the owner as a job freed them."""
    targets: dict[str, str] | None = None
    """What the hosts taken get from campaigns' rollouts (over the train's own); None: own."""
    behind_target: bool = False
    """The cycle was projected past its target, so the planner traded interruptions for pace."""
    ahead_of_target: bool = False
    """The cycle was projected within ``AheadRule.no_eviction`` of its target: no eviction."""
    checked: list[str] = field(default_factory=list)
    """Hosts recorded as visited in place: due, with nothing pending (``planning.resting``)."""
    resting: bool = False
    """Nothing needs a drained visit: the train rests, its cycle not started (nothing taken)."""
    rest_until_hours: float | None = None
    """While resting: when the first health visit falls due (None: only a change wakes it)."""
    cycle_started_hours: float | None = None
    """A resting train's new cycle began at this fleet hour (something needs a visit)."""


@dataclass(frozen=True)
class AheadRule:
    """How a train ahead of its cycle target spares jobs: while the cycle is projected to end
    within ``no_eviction`` of the target it evicts no job; within ``spare_large`` it evicts
    none of more hosts than ``large_domains`` domains (``max_held``); past that, as any
    train."""

    no_eviction: float
    spare_large: float
    large_domains: float


#: Every train with a cycle target, live or simulated, spares jobs so while ahead of it
#: (``simulator.pacing`` has the measurement behind the figures): taking idle hosts and those
#: jobs free as they end or fail, and evicting none of a 512- to 2,048-host job (on meta-24k)
#: for the few due hosts a domain takes of it.
AHEAD_OF_TARGET = AheadRule(no_eviction=0.5, spare_large=0.8, large_domains=4.0)


_OWNER = attrgetter("owner")
#: A piggyback claim lapses this long after the plan that left it, so a train that stopped
#: planning (paused, halted) takes no more: the live train plans at least once per fleet hour
#: while it runs (its poll; at scaled speeds never more often than once a wall second, so the
#: claim spans two polls). A stopping train withdraws it at once (``close_owner``).
PIGGYBACK_CLAIM_HOURS = 2.0
#: Policies that piggyback: the baselines model tools that do not.
PIGGYBACK_POLICIES = frozenset({"job-aware"})


def take_domain(
    b: ClusterBackend,
    owner: str,
    budget: CapacityBudget,
    cycle_started_hours: float,
    max_held: int,
    max_wait_hours: float,
    policy: str,
    known: Collection[str] = (),
    rollouts: Sequence[RolloutScope] = (),
    switch_target: str | None = None,
    claim_until_hours: float | None = None,
    steer_jobs: bool = True,
    cycle_target_hours: float | None = None,
    ahead: AheadRule | None = None,
    rule: VisitRule | None = None,
    resting: bool = False,
) -> Taken:
    """Up to ``max_held`` hosts held by ``owner`` in all: plan the rest and cordon them.

    With campaigns' ``rollouts`` the planner sees as due what they say (``_plan_and_cordon``).
    A job-aware train's standing claim also steers new jobs to visited hosts (``steer_jobs``).
    Its pace against ``cycle_target_hours`` decides how readily it evicts (``_pace``); with a
    visit ``rule``, hosts due with nothing to do are checked in place first, and a ``resting``
    train starts its next cycle only when a host needs a drained visit (``_check_in_place``).
    """
    names = b.host_names()
    limit = max(1, budget.limit(len(names)))  # as the arbiter's grant (cluster_train)
    maintenance = max(1, budget.maintenance_limit(len(names)))
    out = Taken(limit=limit, maintenance=maintenance)
    if rule is not None:
        started = _check_in_place(b, out, owner, cycle_started_hours, rule, resting, switch_target)
        if started is None:
            return _rest(b, out, owner, cycle_started_hours, rule)
        cycle_started_hours = started
    # One snapshot for the whole plan: reading it holds still (its views are the fleet's,
    # cached by the simulated cluster); the cordons below change the fleet, not it.
    snap = b.snapshot(cycle_started_hours)
    held, orphans = _held_by(snap.hosts, owner, known)
    if switch_target is not None and _switches_behind(b, switch_target):
        # racks first, each whole (take_rack); hosts alone once every switch is on target
        racks = _RackAsk(switch_target, held, max_held, max_wait_hours)
        return _take_racks(b, out, owner, orphans, racks, cycle_started_hours)
    slots = max_held - held
    scopes = list(rollouts)
    if scopes and orphans:
        orphans = _covered_alike(orphans, scopes, out)
        slots = 0
    if slots > 0:
        out.asked = True
        pace = _pace(b, out, owner, cycle_started_hours, cycle_target_hours, ahead, max_held)
        ask = _Ask(slots, max_wait_hours, policy, pace)
        _plan_and_cordon(b, out, owner, budget, snap, scopes, ask)
    if policy in PIGGYBACK_POLICIES and not scopes:
        claim = _Claim(cycle_started_hours, max_held, claim_until_hours, steer_jobs)
        _leave_claim(b, out, owner, budget, claim)
    out.piggybacked = [n for n in orphans if b.host(n).reason.endswith(f"({PIGGYBACK_NOTE})")]
    out.hosts = orphans + out.hosts
    out.counts = cycle_counts(b, cycle_started_hours, owner)
    return out


@dataclass(frozen=True)
class _Claim:
    """A job-aware train's standing claim on hosts its jobs free: up to ``max_held`` held,
    lapsing at ``until_hours`` at the latest (its window's close), steering new jobs to visited
    hosts when ``steer_jobs``."""

    cycle_started_hours: float
    max_held: int
    until_hours: float | None
    steer_jobs: bool


def _leave_claim(
    b: ClusterBackend, out: Taken, owner: str, budget: CapacityBudget, claim: _Claim
) -> None:
    """Leave (or renew) the train's piggyback claim with the fleet, within its budget."""
    lapses = b.now + PIGGYBACK_CLAIM_HOURS
    if claim.until_hours is not None:  # a train's window closing ends its claim too
        lapses = min(lapses, claim.until_hours)
    b.set_piggyback(
        PiggybackClaim(
            owner,
            claim.cycle_started_hours,
            claim.max_held,
            out.limit,
            out.maintenance,
            budget.per_rack,
            budget.per_zone,
            lapses,
            visited_first=claim.steer_jobs,
        )
    )


def _check_in_place(
    b: ClusterBackend,
    out: Taken,
    owner: str,
    cycle_started_hours: float,
    rule: VisitRule,
    resting: bool,
    switch_target: str | None,
) -> float | None:
    """Record as visited in place the hosts due with nothing to do (``planning.resting``),
    never taken; the cycle's start, or None when a ``resting`` train (its last cycle complete)
    stays at rest: it starts its next cycle, now, only when some host needs a drained visit."""
    if resting:
        if not _wakes(b, cycle_started_hours, rule, switch_target):
            return None
        # From now: hosts checked below, at this instant, count as visited in the new cycle.
        cycle_started_hours = out.cycle_started_hours = b.now
    now, snap = b.now, b.snapshot(cycle_started_hours)
    for name in checkable(snap.hosts, rule, now):
        if b.check_in_place(name, owner):
            out.checked.append(name)
    return cycle_started_hours


def _held_by(
    hosts: Sequence[HostView], owner: str, known: Collection[str]
) -> tuple[int, list[str]]:
    """How many hosts ``owner`` holds, and those of them untouched its caller does not know."""
    orphans = []
    held = 0
    for h in compress(hosts, map(owner.__eq__, map(_OWNER, hosts))):  # C speed
        if h.owner == owner and h.state in HELD_STATES:
            held += 1
            if h.state in UNTOUCHED_STATES and h.name not in known:
                orphans.append(h.name)
    return held, orphans


@dataclass(frozen=True)
class _RackAsk:
    """A rack visit's ask: whole racks whose switch is not on ``switch_target``, the owner
    holding ``held`` of at most ``max_held`` hosts."""

    switch_target: str
    held: int
    max_held: int
    max_wait_hours: float


def _take_racks(
    b: ClusterBackend,
    out: Taken,
    owner: str,
    orphans: list[str],
    ask: _RackAsk,
    cycle_started_hours: float,
) -> Taken:
    """Hosts held unknown to the caller go back first; else the next whole rack (``take_rack``)."""
    out.asked, out.hosts = True, orphans
    if not orphans and ask.max_held >= 1:
        rack = take_rack(
            b,
            owner,
            ask.switch_target,
            out.limit,
            out.maintenance,
            ask.held,
            ask.max_held,
            ask.max_wait_hours,
        )
        out.hosts, out.waiting = rack.hosts, rack.waiting
    out.counts = cycle_counts(b, cycle_started_hours, owner)
    return out


def _covered_alike(orphans: list[str], scopes: Sequence[RolloutScope], out: Taken) -> list[str]:
    """Hosts we hold unknown to the caller go back first, alone, those covered by the same
    rollouts together (with their targets, into ``out``); the rest come back at the next look."""
    key = covering_key(orphans[0], scopes)
    out.targets = covering_targets(key, scopes)
    return [n for n in orphans if covering_key(n, scopes) == key]


def _switches_behind(b: ClusterBackend, switch_target: str) -> bool:
    """Whether some rack switch is not yet on ``switch_target``."""
    return any(v != switch_target for v in b.rack_switches().values())


@dataclass(frozen=True)
class _Pace:
    """How the planner trades jobs for the cycle's pace: its fill rule (None: its own),
    whether it may evict, and the largest job it may evict (None: any)."""

    fill: float | None = None
    evict: bool = True
    largest: int | None = None


@dataclass(frozen=True)
class _Ask:
    """What the planner is asked for: ``slots`` hosts, drained within ``max_wait_hours``."""

    slots: int
    max_wait_hours: float
    policy: str
    pace: _Pace


def _pace(
    b: ClusterBackend,
    out: Taken,
    owner: str,
    cycle_started_hours: float,
    cycle_target_hours: float | None,
    ahead: AheadRule | None,
    max_held: int,
) -> _Pace:
    """A train whose cycle is projected past ``cycle_target_hours`` evicts sooner
    (``train_plan.BEHIND_TARGET_EVICT_MIN_FILL``): the target is its commitment. One well
    ahead of it spares jobs as ``ahead`` says (``AHEAD_OF_TARGET`` for every train; None only
    in the simulator's ``--no-pace`` experiment): no eviction at all, or none of a large job
    (``choose_domain``'s ``evict`` and ``max_evict_size``); it takes idle and freed hosts and
    lets jobs end or fail. Which of the two it is goes into ``out``."""
    if cycle_target_hours is None:
        return _Pace()
    counts = cycle_counts(b, cycle_started_hours, owner)
    end, on_track = project_cycle_end(counts, cycle_started_hours, cycle_target_hours)
    out.behind_target = on_track is False
    if out.behind_target:
        return _Pace(fill=train_plan.BEHIND_TARGET_EVICT_MIN_FILL)
    if ahead is None or end is None:
        return _Pace()
    share = (end - cycle_started_hours) / cycle_target_hours
    evict = share > ahead.no_eviction
    out.ahead_of_target = not evict
    largest = None
    if share <= ahead.spare_large:
        largest = max(1, int(ahead.large_domains * max_held))
    return _Pace(evict=evict, largest=largest)


def _plan_and_cordon(
    b: ClusterBackend,
    out: Taken,
    owner: str,
    budget: CapacityBudget,
    snap: ClusterSnapshot,
    scopes: Sequence[RolloutScope],
    ask: _Ask,
) -> None:
    """Ask the planner once per set of rollout targets pending, cordon the best plan's hosts
    (into ``out``, with its waiting text and retry hour).

    With campaigns' rollouts (``scopes``, in arrival order) the planner sees as due what they
    say (``planning.rollout``), and ``out.targets`` is what the hosts get from them: the same
    for every host taken (those the same rollouts cover), so a domain installs and verifies one
    set of targets."""
    limit, maintenance = out.limit, out.maintenance
    view = train_plan.BudgetView(limit, budget.per_rack, budget.per_zone, maintenance)
    best: tuple[tuple[bool, int, int], train_plan.DomainPlan, dict[str, str] | None] | None
    best = None
    retry: list[float] = []
    # Jobs that refused a drain which handed their hosts back: not before they said.
    refused = {j: n.until_hours for j, n in b.refusal_notes().items()}
    pace = ask.pace
    for choice in rollout_choices(snap.hosts, scopes):
        plan = train_plan.choose_domain(
            choice.hosts,
            snap.jobs,
            snap.now,
            view,
            ask.slots,
            ask.max_wait_hours,
            ask.policy,
            refused,
            pace.fill,
            pace.evict,
            pace.largest,
        )
        if plan.retry_at_hours is not None:
            retry.append(plan.retry_at_hours)
        # The newest rollout's hosts first (a stage just begun, often a canary wanting its
        # signal soon; older rollouts' hosts it does not cover are bounded by its size),
        # unless the planner can take none of them now; then the most hosts.
        rank = (bool(plan.hosts), max(choice.key, default=-1), len(plan.hosts))
        if best is None or rank > best[0]:
            best = (rank, plan, choice.targets)
    assert best is not None
    _, plan, out.targets = best
    for name in plan.hosts:
        if b.cordon(name, owner, owner, limit, budget.per_rack, budget.per_zone, maintenance):
            out.hosts.append(name)
    out.waiting = plan.waiting
    out.retry_at_hours = plan.retry_at_hours if plan.hosts or not retry else min(retry)


def _wakes(
    b: ClusterBackend, cycle_started_hours: float, rule: VisitRule, switch_target: str | None
) -> bool:
    """Whether a resting train starts a cycle: a host or a rack switch needs a drained visit."""
    if switch_target is not None and _switches_behind(b, switch_target):
        return True
    return wants_visit(b.snapshot(cycle_started_hours).hosts, rule, b.now)


def _rest(
    b: ClusterBackend,
    out: Taken,
    owner: str,
    cycle_started_hours: float,
    rule: VisitRule,
) -> Taken:
    """A resting train's plan: hosts back on target since its cycle ended (from repair) are
    checked, so the cycle stays complete, and nothing is taken. Its piggyback claim is not
    renewed: it lapses (``PIGGYBACK_CLAIM_HOURS``), and meanwhile no host is due for it."""
    snap = b.snapshot(cycle_started_hours)
    for name in checkable(snap.hosts, rule, b.now):
        if b.check_in_place(name, owner):
            out.checked.append(name)
    out.resting = True
    out.rest_until_hours = rest_until(snap.hosts, rule)
    out.waiting = rest_note(out.rest_until_hours)
    out.counts = cycle_counts(b, cycle_started_hours, owner)
    return out
