"""Which hosts a bulk operation covers, and what each of them still needs.

``ScopeFilter`` applies a scope's zone/rack/host patterns to a cluster snapshot and remembers
which patterns matched, so a pattern that matches nothing is an error naming it (a typo must
not silently shrink an operation). ``classify`` splits the hosts in scope into already done,
deferred (out for repair: they take the change before they return) and still to change. It is
separate from packing and estimation, which only ever see the hosts still to change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from orchestrator.models import HostState
from orchestrator.ops.spec import OperationSpec, Scope
from orchestrator.views import ClusterSnapshot, HostView

IN_SERVICE = HostState.IN_SERVICE
_REPAIR_STATES = frozenset({HostState.QUARANTINED, HostState.IN_REPAIR})


class ScopeFilter:
    """Zone/rack/host patterns of a scope, remembering which ones matched something."""

    def __init__(self, scope: Scope) -> None:
        self.lists = {"zones": scope.zones, "racks": scope.racks, "hosts": scope.hosts}
        self.hits: dict[str, set[int]] = {k: set() for k in self.lists}
        self._cache: dict[tuple[str, str], bool] = {}

    def _ok(self, field: str, name: str, cluster: str) -> bool:
        patterns = self.lists[field]
        if patterns is None:
            return True
        key = (field, name)
        if key not in self._cache:
            short = name.removeprefix(cluster + "-")
            found = [
                i for i, p in enumerate(patterns) if fnmatchcase(name, p) or fnmatchcase(short, p)
            ]
            self.hits[field].update(found)
            self._cache[key] = bool(found)
        return self._cache[key]

    def hosts(self, snap: ClusterSnapshot) -> list[HostView]:
        if all(v is None for v in self.lists.values()):
            return list(snap.hosts)
        return [
            h
            for h in snap.hosts
            if self._ok("zones", h.zone, snap.name)
            and self._ok("racks", h.rack, snap.name)
            and self._ok("hosts", h.name, snap.name)
        ]

    def check(self, clusters: Iterable[str]) -> None:
        for field, patterns in self.lists.items():
            for i, p in enumerate(patterns or ()):
                if i not in self.hits[field]:
                    where = ", ".join(sorted(clusters))
                    raise ValueError(f"scope.{field}: {p!r} matches nothing in {where}")


def classify(
    spec: OperationSpec, scoped: Sequence[HostView]
) -> tuple[list[str], list[str], list[HostView]]:
    """Split the scope into already done, deferred (out for repair) and still to change."""
    done: list[str] = []
    deferred: list[str] = []
    todo: list[HostView] = []
    for h in scoped:
        repairing = h.state in _REPAIR_STATES
        if spec.kind == "drain-for-repair":
            (done.append(h.name) if h.state in _REPAIR_STATES else todo.append(h))
        elif spec.kind != "reboot" and all(h.versions.get(c) == v for c, v in spec.targets.items()):
            done.append(h.name)
        elif repairing:
            deferred.append(h.name)
        else:
            todo.append(h)
    return done, deferred, todo
