"""Which hosts a train must drain, which it only checks, and when it rests.

A visit drains a host, stops whatever job runs on it, reboots and verifies it: worth it only
when the host has something pending (a component off its targets) or a health visit falls due
(``verify_every``). A host the cycle reaches with neither is *checked*: recorded as visited
without a cordon, an ask, an eviction or a reboot. A train whose every in-service host is on
its targets with no health visit due *rests*: it starts no cycle until one is, and says until
when a health visit will wake it.

The live train (through ``execution.take.take_domain``) and the simulator decide with these
same functions over plain host views; nothing here reads a clock or a fleet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.contracts.constants import NO_OWNER
from orchestrator.contracts.models import HostState
from orchestrator.contracts.updates import host_targets, pending_components
from orchestrator.contracts.views import HostView
from orchestrator.planning.rollout import RolloutScope, covering_key, covering_targets

IN_SERVICE = HostState.IN_SERVICE


@dataclass(frozen=True)
class VisitRule:
    """What a host must be on (the train's ``targets``, with the campaigns' rollouts covering
    it over them) and how often it gets a drained health visit regardless (``verify_every``
    fleet hours; None: never)."""

    targets: Mapping[str, str]
    rollouts: Sequence[RolloutScope] = ()
    verify_every_hours: float | None = None

    def targets_of(self, name: str) -> dict[str, str]:
        """The versions host ``name`` should run: the train's own, its rollouts' over them."""
        key = covering_key(name, self.rollouts)
        riding = covering_targets(key, self.rollouts) if key else None
        return host_targets({**self.targets, **(riding or {})})

    def health_due_at(self, h: HostView) -> float | None:
        """The fleet hour ``h``'s health visit falls due (its last boot plus the interval; a
        host whose last boot is unknown is due at once), or None without health visits."""
        if self.verify_every_hours is None:
            return None
        if h.last_boot is None:
            return float("-inf")
        return h.last_boot + self.verify_every_hours

    def needs_drain(self, h: HostView, now: float) -> bool:
        """Something is pending on ``h``, or its health visit is due."""
        if any(scope.lacks(h) for scope in self.rollouts):
            return True
        if pending_components(h.versions, self.targets_of(h.name)):
            return True
        due_at = self.health_due_at(h)
        return due_at is not None and due_at <= now


def free_in_service(hosts: Iterable[HostView]) -> list[HostView]:
    """Hosts serving and held by nobody: the only ones a train may check or take."""
    return [h for h in hosts if h.state == IN_SERVICE and h.owner == NO_OWNER]


def checkable(hosts: Iterable[HostView], rule: VisitRule, now: float) -> list[str]:
    """Hosts still due this cycle with nothing to do: recorded as checked, never drained."""
    return [h.name for h in free_in_service(hosts) if h.due and not rule.needs_drain(h, now)]


def wants_visit(hosts: Iterable[HostView], rule: VisitRule, now: float) -> bool:
    """Whether any host serving, free, needs a drained visit: a resting train starts a cycle."""
    return any(rule.needs_drain(h, now) for h in free_in_service(hosts))


def rest_until(hosts: Iterable[HostView], rule: VisitRule) -> float | None:
    """The fleet hour the first health visit falls due (None: nothing but a change wakes it)."""
    times = [t for h in free_in_service(hosts) if (t := rule.health_due_at(h)) is not None]
    return min(times, default=None)


def rest_note(until: float | None) -> str:
    """What a resting train waits for, in the words its status and page show."""
    wakes = (
        f"the first health visit falls due at fleet hour {until:.1f}"
        if until is not None
        else "new targets, a campaign's rollout or a host needing updates starts the next cycle"
    )
    return f"resting: every host is on its targets; {wakes}"
