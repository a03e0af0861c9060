"""Cutting the hosts an operation still has to change into waves that fit every budget.

``Packer`` fills waves (``WaveBin``) of at most ``cap`` more hosts within ``per_rack`` and
``per_zone``, counting hosts already out of service once; ``pack_waves`` puts running jobs whole
into one wave in order of their end (next-fit) whenever they fit in one, splits larger ones host
by host from their first wave on, and first-fits idle hosts into the gaps. ``check_one_wave``
decides whether ``consistency: cluster`` (or ``drain-for-repair``) may take a cluster's whole
scope at once, and says what it would take if not. It is separate from scope filtering and from
estimation: it knows only hosts, jobs and the budget, never fleet time beyond the estimate it asks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from orchestrator.contracts.models import CapacityBudget, HostState
from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.ui_text import duration
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.planning.ops_estimate import estimate_waves

IN_SERVICE = HostState.IN_SERVICE


class NoRoom(Exception):
    """A host that no wave can take within ``per_rack``/``per_zone``: the plan is refused."""


class WaveBin:
    """One wave being filled; only hosts now in service count against the budget."""

    def __init__(self) -> None:
        self.hosts: list[HostView] = []
        self.taken = 0
        self.rack: Counter[str] = Counter()
        self.zone: Counter[str] = Counter()

    def add(self, h: HostView) -> None:
        self.hosts.append(h)
        if h.state == IN_SERVICE:
            self.taken += 1
            self.rack[h.rack] += 1
            self.zone[h.zone] += 1


class Packer:
    """Waves taking at most ``cap`` more hosts, within the per-rack/per-zone limits.

    A host already out of service (held by a train, say) is counted in ``down`` and costs its
    wave nothing more: when the wave comes, its holder will have released it.
    """

    def __init__(self, cap: int, budget: CapacityBudget, down: Sequence[HostView]) -> None:
        self.cap, self.per_rack, self.per_zone = cap, budget.per_rack, budget.per_zone
        self.down_rack = Counter(h.rack for h in down)
        self.down_zone = Counter(h.zone for h in down)
        self.bins: list[WaveBin] = []
        self._first_open = 0

    def fits(self, b: WaveBin, group: Sequence[HostView]) -> bool:
        group = [h for h in group if h.state == IN_SERVICE]
        if b.taken + len(group) > self.cap:
            return False
        if self.per_rack is not None:
            for rack, k in Counter(h.rack for h in group).items():
                if self.down_rack[rack] + b.rack[rack] + k > self.per_rack:
                    return False
        if self.per_zone is not None:
            for zone, k in Counter(h.zone for h in group).items():
                if self.down_zone[zone] + b.zone[zone] + k > self.per_zone:
                    return False
        return True

    def _open(self) -> WaveBin:
        self.bins.append(WaveBin())
        return self.bins[-1]

    def place_group(self, group: Sequence[HostView]) -> bool:
        """Next-fit a whole job; False (and nothing placed) if it fits no wave at all."""
        if not self.fits(WaveBin(), group):
            return False
        b = self.bins[-1] if self.bins else self._open()
        if not self.fits(b, group):
            b = self._open()
        for h in group:
            b.add(h)
        return True

    def place_one(self, h: HostView, start: int = 0) -> None:
        """First-fit one host into the waves from ``start`` on, opening one if none has room."""
        while self._first_open < len(self.bins) and self.bins[self._first_open].taken >= self.cap:
            self._first_open += 1
        for b in self.bins[max(start, self._first_open) :]:
            if self.fits(b, (h,)):
                b.add(h)
                return
        b = self._open()
        if not self.fits(b, (h,)):
            raise NoRoom(
                f"rack {h.rack} / zone {h.zone} has no room left under budget.per_rack/per_zone"
            )
        b.add(h)


def pack_waves(
    snap: ClusterSnapshot, todo: list[HostView], packer: Packer
) -> tuple[list[list[HostView]], int]:
    """Jobs whole (by end time, next-fit), split ones host by host, idle hosts into the gaps."""
    by_job: dict[int, list[HostView]] = {}
    idle: list[HostView] = []
    for h in todo:
        if h.job_id is not None and h.job_id in snap.jobs:
            by_job.setdefault(h.job_id, []).append(h)
        else:
            idle.append(h)
    split = 0
    for jid in sorted(by_job, key=lambda j: (snap.jobs[j].end_hours, j)):
        if not packer.place_group(by_job[jid]):
            split += 1
            start = max(0, len(packer.bins) - 1)
            for h in by_job[jid]:
                packer.place_one(h, start)
    for h in idle:
        packer.place_one(h)
    return [b.hosts for b in packer.bins], split


def check_one_wave(
    spec: OperationSpec,
    snap: ClusterSnapshot,
    todo: list[HostView],
    down: list[HostView],
    budget: CapacityBudget,
    maint: Mapping[str, float],
) -> tuple[int, str | None]:
    """Check that the whole scope of a cluster may go at once; (limit in force, refusal)."""
    names = {h.name for h in todo}
    need = len(todo) + sum(1 for h in down if h.name not in names)
    pct = _pct(need, snap.hosts_total)
    if spec.consistency != "cluster":  # drain-for-repair: hosts stay out until repaired
        limit = budget.limit(snap.hosts_total)
        if need <= limit and Packer(limit, budget, down).fits(WaveBin(), todo):
            return limit, None
        return limit, (
            f"{snap.name}: drain-for-repair keeps {need} hosts out of service until repaired; "
            f'budget allows {limit}: raise budget.max_unavailable to "{pct}" '
            "(and per_rack/per_zone if set)"
        )
    window = spec.window
    limit = window.limit(snap.hosts_total) if window else 0
    hours = estimate_waves(snap, [todo], maint, spec.drain.max_wait_hours).hours
    ask = f'add window: {{max_unavailable: "{pct}", duration: "{math.ceil(hours)}h"}}'
    if need > limit:
        return limit, (
            f"{snap.name}: consistency: cluster needs a window budget of {pct} ({need} hosts) "
            f"for ~{duration(hours)}; {ask}"
        )
    if window is not None and hours > window.duration_hours:
        return limit, (
            f"{snap.name}: consistency: cluster needs ~{duration(hours)} but window.duration is "
            f"{duration(window.duration_hours)}; {ask}"
        )
    return limit, None


def _pct(hosts: int, total: int) -> str:
    return f"{math.ceil(hosts * 100 / total)}%"
