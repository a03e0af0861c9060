"""Incremental indexes of a simulated cluster, kept up to date as its records change.

The budget checks of every cordon, the scheduler's busy count and idle hosts, the next job end
and repair end of ``advance``, and the planners' snapshot all read the whole cluster; on
meta-24k (3,072 hosts, thousands of jobs over a cycle) scanning it at every event made one
simulated cycle cost tens of seconds. ``HostRec`` and ``JobRec`` report every write of the fields
these read to the index of the cluster that holds them (``watch``), so each read is a counter,
a set or a heap top instead of a scan, whoever writes the record (the fleet's own parts, the
SQLite loader, a test setting a field by hand). The figures are the very ones the scans gave:

- ``down`` (hosts out of service), ``down_rack``, ``down_zone``, ``planned`` (hosts held for
  planned work, ``planned_count``), ``held_by`` (hosts in a held state per owner), ``busy``
  (hosts running a job) and ``free`` (idle in-service hosts);
- ``next_job_end`` / ``next_repair``: the earliest running job's end (ties: the lowest job id,
  the jobs table's order) and the earliest ``repair_until`` (ties: inventory order), from heaps
  whose stale entries are dropped when they come to the top;
- ``views``: one ``HostView`` per host, rebuilt only for hosts written since the last snapshot
  of the same cycle.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import HostView, JobView, is_due
from orchestrator.fleet.ledger_rules import holds_planned_work, host_view

if TYPE_CHECKING:
    from orchestrator.fleet.sim_records import HostRec, JobRec

IN_SERVICE = HostState.IN_SERVICE
#: Host fields that the counters read.
COUNTED = frozenset({"state", "owner", "job_id"})
#: Host fields a ``HostView`` carries (besides its name, rack and zone, which never change).
VIEWED = frozenset({"state", "owner", "job_id", "last_visit", "last_boot", "versions", "reason"})
HOST_WATCHED = VIEWED | {"repair_until"}
#: Host fields that decide whether it is idle in service, or when it leaves repair.
PLACED = frozenset({"state", "job_id", "repair_until"})
#: Job fields that decide whether it runs and when it ends.
JOB_TIMED = frozenset({"state", "start", "work_hours"})
#: Job fields a ``JobView`` carries.
JOB_WATCHED = JOB_TIMED | {"ckpt_hours", "hosts", "size", "id"}
_UNBUILT = object()


class SimIndex:
    """Counters, sets and heaps over one cluster's hosts and jobs (see the module docstring)."""

    def __init__(self, hosts: list[HostRec]) -> None:
        self.order = [h.name for h in hosts]
        self.recs = list(hosts)  # by position, as ``order``
        self.pos = {n: i for i, n in enumerate(self.order)}
        self.down = self.planned = self.busy = 0
        self.down_rack: Counter[str] = Counter()
        self.down_zone: Counter[str] = Counter()
        self.held_by: Counter[str] = Counter()
        self.free: set[str] = set()
        self.repairs: list[tuple[float, int, str]] = []
        self.ends: list[tuple[float, int]] = []
        self.running: dict[int, JobRec] = {}
        self.views: list[HostView | None] = [None] * len(hosts)
        self.view_tuple: tuple[HostView, ...] | None = None
        self.view_cycle: object = _UNBUILT
        self.dirty: set[int] = set()
        self.jobs: dict[int, JobRec] = {}
        #: running jobs' views at ``job_views_at`` (None: a job changed since)
        self.job_views_at: tuple[float, dict[int, JobView]] | None = None
        for h in hosts:
            h.__dict__["_index"] = self
            self._count(h, 1)
            self._place(h, "repair_until")

    # ------------------------------------------------------------- hosts
    def _count(self, h: HostRec, sign: int) -> None:
        if h.state != IN_SERVICE:
            self.down += sign
            self.down_rack[h.rack] += sign
            self.down_zone[h.zone] += sign
            if h.state in HELD_STATES:
                self.held_by[h.owner] += sign
                if holds_planned_work(h.state, h.owner):
                    self.planned += sign
        if h.job_id is not None:
            self.busy += sign

    def _place(self, h: HostRec, field: str) -> None:
        if field not in PLACED:
            return
        if h.state == IN_SERVICE and h.job_id is None:
            self.free.add(h.name)
        else:
            self.free.discard(h.name)
        if field == "repair_until" and h.repair_until is not None:
            heapq.heappush(self.repairs, (h.repair_until, self.pos[h.name], h.name))

    def host_write(self, h: HostRec, field: str, value: object) -> None:
        """Write a watched ``field`` of ``h`` (not ``job_id``: ``job_id_changed``): uncount it,
        write, count it again, then its place among the idle hosts, repairs and views."""
        counted = field in COUNTED and self._recounts(h, field, value)
        if counted:
            self._count(h, -1)
        object.__setattr__(h, field, value)
        if counted:
            self._count(h, 1)
        self._place(h, field)
        if field in VIEWED:
            self.dirty.add(self.pos[h.name])

    @staticmethod
    def _recounts(h: HostRec, field: str, value: object) -> bool:
        """Whether writing ``value`` to ``field`` can change what ``_count`` counts of ``h``:
        most of a visit's state changes are between held states (cordoned, draining, in
        maintenance, verifying), and an owner counts only for a held host."""
        if field == "state":
            old = h.state
            return (old == IN_SERVICE) != (value == IN_SERVICE) or (old in HELD_STATES) != (
                value in HELD_STATES
            )
        if field == "owner":
            return h.state in HELD_STATES
        return True

    def job_id_changed(self, h: HostRec, old: int | None) -> None:
        """``host_write``'s bookkeeping for ``job_id`` alone, after the write: its state
        and owner are as they were, so only ``busy``, ``free`` and the view can change."""
        if (old is None) != (h.job_id is None):
            self.busy += 1 if old is None else -1
        if h.state == IN_SERVICE and h.job_id is None:
            self.free.add(h.name)
        else:
            self.free.discard(h.name)
        self.dirty.add(self.pos[h.name])

    def set_job_id(self, hosts: list[HostRec], job_id: int | None) -> None:
        """Write ``job_id`` on each of ``hosts`` (all of this index), keeping the index as
        ``HostRec.__setattr__`` and ``job_id_changed`` would host by host: the scheduler places
        and releases whole jobs, ~10^6 host writes a simulated month, where the per-write
        dispatch cost more than the bookkeeping (here in set operations over the job's hosts)."""
        names = [h.name for h in hosts]
        had_none = 0
        for h in hosts:
            fields = h.__dict__
            had_none += fields["job_id"] is None
            fields["job_id"] = job_id
        if job_id is None:
            self.busy -= len(hosts) - had_none
            serving = [h.name for h in hosts if h.state == IN_SERVICE]
            self.free.difference_update(names)
            self.free.update(serving)
        else:
            self.busy += had_none
            self.free.difference_update(names)
        self.dirty.update(map(self.pos.__getitem__, names))

    def next_repair(self, hosts: dict[str, HostRec]) -> tuple[float, HostRec | None]:
        """The earliest ``repair_until`` of any host, and the first host with it."""
        heap = self.repairs
        while heap:
            until, _, name = heap[0]
            h = hosts[name]
            if h.repair_until == until:
                return until, h
            heapq.heappop(heap)
        return float("inf"), None

    def views_for(self, hosts: dict[str, HostRec], cycle: float | None) -> tuple[HostView, ...]:
        """Every host's ``HostView`` in inventory order (``due`` for cycle ``cycle``)."""
        if cycle != self.view_cycle or self.view_tuple is None:
            self.view_cycle = cycle
            todo: Iterable[int] = range(len(self.order))
        elif not self.dirty:
            return self.view_tuple
        else:
            todo = self.dirty
        views, order = self.views, self.order
        changed = self.view_tuple is None
        for i in todo:
            h, old = hosts[order[i]], views[i]
            # Half the hosts written since the last snapshot look as they did (a job placed and
            # ended in between, an owner written again): their view stays, unbuilt.
            if (
                old is not None
                and old.job_id == h.job_id
                and old.state == h.state
                and old.owner == h.owner
                and old.last_visit == h.last_visit
                and old.last_boot == h.last_boot
                and old.reason == ("" if h.state == IN_SERVICE else h.reason)
                and old.versions is h.versions
                and old.due == (cycle is not None and is_due(h, cycle))
            ):
                continue
            views[i] = host_view(h, cycle)
            changed = True
        self.dirty = set()
        if changed:
            self.view_tuple = tuple(views)  # type: ignore[arg-type]  # every slot built above
        assert self.view_tuple is not None
        return self.view_tuple

    # -------------------------------------------------------------- jobs
    def job_changed(self, job: JobRec, field: str) -> None:
        if field not in JOB_WATCHED or self.jobs.get(job.id) is not job:
            return
        self.job_views_at = None
        if field not in JOB_TIMED:
            return
        if job.state == "running":
            self.running[job.id] = job
            if job.start is not None:
                heapq.heappush(self.ends, (job.end, job.id))
        else:
            self.running.pop(job.id, None)

    def job_added(self, job: JobRec) -> None:
        job.__dict__["_index"] = self
        self.job_changed(job, "state")

    def job_removed(self, job_id: int) -> None:
        self.running.pop(job_id, None)
        self.job_views_at = None

    def job_views(self, now: float) -> dict[int, JobView]:
        """Every running job's view at fleet hour ``now`` by id (a copy: the caller's own)."""
        cached = self.job_views_at
        if cached is None or cached[0] != now:
            running = self.running
            cached = self.job_views_at = (now, {j: running[j].view(now) for j in sorted(running)})
        return dict(cached[1])

    def next_job_end(self) -> tuple[float, JobRec | None]:
        """The earliest end of a running job, and the job (the lowest id on a tie)."""
        heap = self.ends
        while heap:
            end, jid = heap[0]
            j = self.jobs.get(jid)
            if j is not None and j.state == "running" and j.start is not None and j.end == end:
                return end, j
            heapq.heappop(heap)
        return float("inf"), None


class JobTable(dict[int, "JobRec"]):
    """A cluster's jobs by id: every job put in is watched by the cluster's index."""

    def __init__(self, index: SimIndex, jobs: dict[int, JobRec]) -> None:
        super().__init__()
        self.index = index
        index.jobs = self
        for jid, job in jobs.items():
            self[jid] = job

    def __setitem__(self, key: int, job: JobRec) -> None:
        old = self.get(key)
        super().__setitem__(key, job)
        if old is not None and old is not job:
            old.__dict__.pop("_index", None)
            self.index.job_removed(key)
        self.index.job_added(job)

    def __delitem__(self, key: int) -> None:
        job = self[key]
        super().__delitem__(key)
        job.__dict__.pop("_index", None)
        self.index.job_removed(key)

    def pop(self, key: int, *default: Any) -> Any:  # type: ignore[override]
        if key in self:
            job = self[key]
            del self[key]
            return job
        return default[0] if default else super().pop(key)
