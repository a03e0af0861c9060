"""Which hosts a bulk operation covers, and what each of them still needs.

``ScopeFilter`` applies a scope's zone/rack/host patterns to a cluster snapshot and remembers
which patterns matched, so a pattern that matches nothing is an error naming it (a typo must
not silently shrink an operation). ``classify`` splits the hosts in scope into already done,
deferred (out for repair: they take the change before they return) and still to change. It is
separate from packing and estimation, which only ever see the hosts still to change.

The semantics are those of ``fnmatchcase`` against the full name and the name after
``<cluster>-``: a name is in scope when any pattern matches it, and a pattern counts as matched
when it matches a name that was looked at (a rack only where its zone passed, a host only where
its zone and rack did). The matching itself, near-linear in names plus patterns as a scope may
list tens of thousands, is ``scope_patterns``.

On a Slurm fleet a scope may also name partitions (a node in any of them), a hostlist of nodes
and features (a node carrying all of them), read from each host view's ``partitions`` and
``features``; a backend whose views carry none (the simulated fleet) refuses them, naming the
field. The fields are checked in that order, after zone, rack and host, by the same rule: an
entry counts as matched where it matched a node that was looked at.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from orchestrator.contracts.constants import REPAIR_STATES
from orchestrator.contracts.models import HostState
from orchestrator.contracts.ops_spec import SLURM_SCOPE_FIELDS, OperationSpec, Scope
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.planning.scope_patterns import PatternField

IN_SERVICE = HostState.IN_SERVICE
_REPAIR_STATES = REPAIR_STATES


# -------------------------------------------------------------------------------- a scope
#: What a partition pattern is matched as: the whole name (no cluster prefix to drop).
_NO_CLUSTER = "\0"


class ScopeFilter:
    """Zone/rack/host patterns of a scope, and on Slurm its partitions, hostlist and features,
    remembering which ones matched something."""

    def __init__(self, scope: Scope) -> None:
        lists = {
            "zones": scope.zones,
            "racks": scope.racks,
            "hosts": scope.hosts,
            "partitions": scope.partitions,
            "nodes": scope.node_names(),
        }
        self.fields = {k: PatternField(k, v) for k, v in lists.items() if v is not None}
        self.features = None if scope.features is None else list(dict.fromkeys(scope.features))
        self._carried: set[str] = set()  # features some node looked at carries
        self.slurm = [f for f in SLURM_SCOPE_FIELDS if getattr(scope, f) is not None]

    def hosts(self, snap: ClusterSnapshot) -> list[HostView]:
        if not self.fields and self.features is None:
            return list(snap.hosts)
        if self.slurm and any(h.partitions is None or h.features is None for h in snap.hosts):
            raise ValueError(
                f"scope.{self.slurm[0]}: cluster {snap.name} has no Slurm partitions or node "
                "features (not supported on the simulated fleet); scope it by cluster, zones, "
                "racks or hosts"
            )
        zones, racks, hosts = (self.fields.get(k) for k in ("zones", "racks", "hosts"))
        c = snap.name
        return [
            h
            for h in snap.hosts
            if (zones is None or zones.ok(h.zone, c))
            and (racks is None or racks.ok(h.rack, c))
            and (hosts is None or hosts.ok(h.name, c))
            and self._slurm_ok(h, c)
        ]

    def _slurm_ok(self, h: HostView, cluster: str) -> bool:
        parts, nodes = self.fields.get("partitions"), self.fields.get("nodes")
        # every partition is looked at (a list, not any's shortcut): each pattern it matches counts
        if parts is not None and not any([parts.ok(p, _NO_CLUSTER) for p in h.partitions or ()]):
            return False
        if nodes is not None and not nodes.ok(h.name, cluster):
            return False
        if self.features is None:
            return True
        have = set(h.features or ())
        self._carried.update(f for f in self.features if f in have)
        return all(f in have for f in self.features)

    def check(self, clusters: Iterable[str]) -> None:
        """ValueError naming the field and the first pattern that matched nothing."""
        where = ", ".join(sorted(clusters))
        for field in self.fields.values():
            pattern = field.unmatched()
            if pattern is not None:
                raise ValueError(f"scope.{field.field}: {pattern!r} matches nothing in {where}")
        for feature in self.features or ():
            if feature not in self._carried:
                raise ValueError(f"scope.features: no node in scope carries {feature!r} ({where})")


def classify(
    spec: OperationSpec, scoped: Sequence[HostView], since: float | None = None
) -> tuple[list[str], list[str], list[HostView]]:
    """Split the scope into already done, deferred (out for repair) and still to change.

    A version change is done where the versions are already there; a reboot, where the host
    has booted since fleet hour ``since`` (when the operation began; None: nothing is done yet).
    """
    done: list[str] = []
    deferred: list[str] = []
    todo: list[HostView] = []
    for h in scoped:
        repairing = h.state in _REPAIR_STATES
        if spec.kind == "drain-for-repair":
            (done.append(h.name) if h.state in _REPAIR_STATES else todo.append(h))
        elif spec.kind == "reboot":
            booted = since is not None and h.last_boot is not None and h.last_boot >= since
            if booted and not repairing:
                done.append(h.name)
            elif repairing:
                deferred.append(h.name)
            else:
                todo.append(h)
        elif all(h.versions.get(c) == v for c, v in spec.targets.items()):
            done.append(h.name)
        elif repairing:
            deferred.append(h.name)
        else:
            todo.append(h)
    return done, deferred, todo
