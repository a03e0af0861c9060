"""A campaign's rollout on a train: which hosts the train may take, and what they get.

Pure functions over host views, used by the train's ``plan_domain`` step (and testable alone).
A rollout is a set of targets for a set of hosts (a canary of 4, or every host of the cluster).
While some in-service hosts of the rollout lack its targets, the train takes only those: the
campaign's stage is waiting for them, and the train is the one actor draining the cluster's
hosts, so there is no second one. Once none is pending the train goes back to its own cycle,
leaving the rollout's hosts alone when the rollout is partial (a normal visit would give them
the train's own targets), or visiting nothing at all (``only``: a train the campaign started
where none ran, which has no cycle of its own to go back to).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import HostView


@dataclass(frozen=True)
class RolloutScope:
    """``targets`` for ``hosts`` (None: every host of the cluster); ``only``: nothing else.
    ``failed``: hosts that failed on these targets once, never given them again."""

    targets: Mapping[str, str]
    hosts: frozenset[str] | None = None
    only: bool = False
    failed: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        targets: Mapping[str, str],
        hosts: Iterable[str] | None,
        only: bool,
        failed: Iterable[str] = (),
    ) -> RolloutScope:
        return cls(
            dict(targets), None if hosts is None else frozenset(hosts), only, frozenset(failed)
        )

    def covers(self, name: str) -> bool:
        return self.hosts is None or name in self.hosts

    def lacks(self, h: HostView) -> bool:
        """Whether ``h`` is still to get the rollout's targets (an in-service host of it that
        has not failed on them already: a host the change broke once is the campaign's
        evidence, not a host to break again)."""
        return (
            self.covers(h.name)
            and h.name not in self.failed
            and h.state == HostState.IN_SERVICE
            and any(h.versions.get(c) != v for c, v in self.targets.items())
        )


@dataclass(frozen=True)
class RolloutPlan:
    """Host views with ``due`` as the rollout has it, and whether they get the rollout."""

    hosts: tuple[HostView, ...]
    rollout: bool
    """The hosts the train takes now get the rollout's targets (merged over its own)."""
    pending: int


def apply_rollout(hosts: Sequence[HostView], scope: RolloutScope | None) -> RolloutPlan:
    """Mark due what the train should take now under ``scope`` (the module docstring's rule)."""
    if scope is None:
        return RolloutPlan(tuple(hosts), False, 0)
    lacking = {h.name for h in hosts if scope.lacks(h)}
    if lacking or scope.only:
        due = [dataclasses.replace(h, due=h.name in lacking) for h in hosts]
        return RolloutPlan(tuple(due), True, len(lacking))
    if scope.hosts is None:
        return RolloutPlan(tuple(hosts), True, 0)  # every host is the rollout's: visits keep it
    rest = [dataclasses.replace(h, due=h.due and not scope.covers(h.name)) for h in hosts]
    return RolloutPlan(tuple(rest), False, 0)


def domain_targets(
    own: Mapping[str, str], scope: RolloutScope | None, rollout: bool
) -> dict[str, str]:
    """What a domain's hosts get: the train's own targets, with the rollout's over them."""
    if scope is None or not rollout:
        return dict(own)
    return {**own, **scope.targets}


def recorded_targets(own: Mapping[str, str], scope: RolloutScope | None) -> dict[str, str]:
    """The cluster's recorded targets (repair reimages with them): a partial rollout's stay out."""
    if scope is None or scope.hosts is not None:
        return dict(own)
    return {**own, **scope.targets}


# ------------------------------------------------------------ several rollouts at once
# Several campaigns may ride one train (a NIC firmware rolling, then a BIOS starting): each is
# a scope as above, in the order they arrived. A host the train takes gets the train's own
# targets with every rollout covering it over them, later rollouts winning on a component both
# change. Hosts covered by different sets of rollouts get different targets, and a domain's
# hosts all get the same (one install and one verification per domain), so the train is given
# one choice per set of covering rollouts and takes its next domain from one of them.


@dataclass(frozen=True)
class RolloutChoice:
    """Host views with ``due`` for one set of covering rollouts, and what those hosts get."""

    hosts: tuple[HostView, ...]
    targets: dict[str, str] | None
    """The rollouts' targets merged in arrival order (over the train's own); None: own only."""
    pending: int
    key: tuple[int, ...] = ()
    """The rollouts (places in the scopes) covering the hosts this choice makes due."""


def _merged(scopes: Iterable[RolloutScope]) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in scopes:
        out.update(s.targets)
    return out


def rollout_choices(
    hosts: Sequence[HostView], scopes: Sequence[RolloutScope]
) -> list[RolloutChoice]:
    """What the train may take now under every rollout riding it (the largest set of pending
    hosts first); one choice without rollouts. The module docstring's rule, each
    host's set of covering rollouts deciding what it gets: a canary's targets never reach a
    host outside it."""
    if not scopes:
        return [RolloutChoice(tuple(hosts), None, 0)]
    whole_key = tuple(i for i, s in enumerate(scopes) if s.hosts is None)
    only = any(s.only for s in scopes)
    groups: dict[tuple[int, ...], set[str]] = {}
    for h in hosts:
        if any(s.lacks(h) for s in scopes):
            key = covering_key(h.name, scopes)
            groups.setdefault(key, set()).add(h.name)
    if groups:
        pending = sum(len(g) for g in groups.values())
        ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        return [
            RolloutChoice(
                tuple(dataclasses.replace(h, due=h.name in names) for h in hosts),
                covering_targets(key, scopes),
                pending,
                key,
            )
            for key, names in ranked
        ]
    targets = covering_targets(whole_key, scopes)
    if only:
        idle = tuple(dataclasses.replace(h, due=False) for h in hosts)
        return [RolloutChoice(idle, targets, 0, whole_key)]
    partial = [s for s in scopes if s.hosts is not None]
    rest = [
        dataclasses.replace(h, due=h.due and not any(s.covers(h.name) for s in partial))
        if partial
        else h
        for h in hosts
    ]
    return [RolloutChoice(tuple(rest), targets, 0, whole_key)]


def recorded_targets_of(own: Mapping[str, str], scopes: Sequence[RolloutScope]) -> dict[str, str]:
    """The cluster's recorded targets under several rollouts: the train's own, with those of
    rollouts covering every host over them (arrival order); partial ones stay out."""
    return {**own, **_merged(s for s in scopes if s.hosts is None)}


def covering_key(name: str, scopes: Sequence[RolloutScope]) -> tuple[int, ...]:
    """Which rollouts (their places in ``scopes``) cover host ``name``."""
    return tuple(i for i, s in enumerate(scopes) if s.covers(name))


def covering_targets(key: tuple[int, ...], scopes: Sequence[RolloutScope]) -> dict[str, str] | None:
    """The targets of the rollouts ``key`` names, merged in arrival order; None: none."""
    return _merged(scopes[i] for i in key) if key else None
