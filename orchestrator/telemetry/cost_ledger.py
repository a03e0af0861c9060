"""The live ledger: what maintenance cost the jobs, read from the fleet's durable record.

The record is replayed, cluster by cluster, into the simulator's own cost code
(``planning.cost.CostLedger``), so a part means the same live and simulated:

- ``lost_work`` and ``restart``: every ``job_interrupted`` a maintenance owner caused (its
  ``cause`` is ``maintenance:<owner>``): the work the record says it lost, and the pinned restart
  by all its GPUs;
- ``held_idle``: hosts an owner holds installing or verifying (``in_maintenance``,
  ``verifying``) with no job on them; ``drain_wait``: hosts it holds cordoned or draining with no
  job on them. The record does not carry the scheduler's queue, so every such hour counts (the
  simulator counts only those a queued job could have used): live, the held parts are an upper
  bound;
- ``checkpoint_writes``: 0 (nothing asks a job to checkpoint yet).

The holder of a host is the ``owner`` of the ``host_state`` entry that cordoned (or reclaimed)
it, as the audit reads it. Only what falls in the window ``[start, end]`` (fleet hours) counts;
a hold open at the end counts up to it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.contracts.backend import FleetBackend, RecordEntry
from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.models import GPUS_PER_HOST, HostState
from orchestrator.planning.cost import PARTS, CostLedger, RestartModel, owner_kind

_WORKING = frozenset({HostState.IN_MAINTENANCE, HostState.VERIFYING})
_JOB_KINDS = frozenset({"job_start", "job_end", "job_interrupted"})


@dataclass
class JobSpan:
    """A job as the record shows it: its hosts, first start and last end (None: running)."""

    hosts: int
    started: float
    ended: float | None = None

    def gpu_hours(self, now: float) -> float:
        """GPU-hours of wall time from its first start to its end (or ``now``)."""
        end = now if self.ended is None else self.ended
        return max(0.0, end - self.started) * self.hosts * GPUS_PER_HOST


@dataclass
class ClusterReplay:
    """One cluster's record replayed into a ``CostLedger`` over a window of fleet hours."""

    start: float = 0.0
    ledger: CostLedger = field(default_factory=CostLedger)
    holder: dict[str, str] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)
    job_hosts: dict[int, list[str]] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)
    """Host -> when its current charged hold began (only hosts being charged)."""
    last_t: float = 0.0
    jobs: dict[int, JobSpan] = field(default_factory=dict)
    """Job -> its size and span in the record (for the ETTR its stops cost it)."""
    touched: dict[str, dict[int, float]] = field(default_factory=dict)
    """Owner -> job -> the GPU-hours its stops cost that job (lost work and restart)."""

    def apply(self, e: RecordEntry) -> None:
        self.last_t = max(self.last_t, e.t)
        if e.kind == "host_state" and e.host is not None:
            self._settle(e.host, e.t)
            self._state(e)
            self._charge_from(e.host, e.t)
        elif e.kind in _JOB_KINDS:
            self._job(e)

    def _state(self, e: RecordEntry) -> None:
        assert e.host is not None
        d, after = e.detail, str(e.detail.get("after"))
        self.state[e.host] = after
        if d.get("owner") and (after == HostState.CORDONED or d.get("reclaimed")):
            self.holder[e.host] = str(d["owner"])
        elif after not in HELD_STATES:
            self.holder.pop(e.host, None)

    def _job(self, e: RecordEntry) -> None:
        d = e.detail
        job = int(d.get("job", -1))
        if e.kind == "job_start":
            hosts = [str(h) for h in d.get("hosts") or []]
            self.job_hosts[job] = hosts
            span = self.jobs.setdefault(job, JobSpan(len(hosts), e.t))
            span.ended = None
        else:
            hosts = self.job_hosts.pop(job, [])
            if job in self.jobs:
                self.jobs[job].ended = e.t
            if e.kind == "job_interrupted" and e.t >= self.start:
                self._stop(job, d)
        for name in hosts:
            self._settle(name, e.t)
            (self.busy.add if e.kind == "job_start" else self.busy.discard)(name)
            self._charge_from(name, e.t)

    def _stop(self, job: int, detail: Mapping[str, Any]) -> None:
        """A stop into the ledger, and what it cost the job into its owner's ``touched``."""
        before = self.ledger.total()
        owner = self.ledger.stop(detail)
        if owner is not None:
            jobs = self.touched.setdefault(owner, {})
            jobs[job] = jobs.get(job, 0.0) + self.ledger.total() - before

    def _charged_part(self, host: str) -> tuple[str, bool] | None:
        """(owner, working) when ``host`` is held idle by a maintenance owner, else None."""
        owner = self.holder.get(host)
        state = self.state.get(host)
        if owner is None or owner in NOT_MAINTENANCE_OWNERS or host in self.busy:
            return None
        if state not in HELD_STATES:
            return None
        return owner, state in _WORKING

    def _charge_from(self, host: str, t: float) -> None:
        if self._charged_part(host) is not None:
            self.since[host] = t

    def _settle(self, host: str, t: float) -> None:
        began = self.since.pop(host, None)
        part = self._charged_part(host)
        if began is None or part is None:
            return
        owner, working = part
        dt = t - max(began, self.start)
        self.ledger.hold(owner, dt, int(working), int(not working), None)

    def with_open(self) -> CostLedger:
        """The ledger with the holds still open counted up to the last entry (kept apart: the
        replay goes on)."""
        out = CostLedger(self.ledger.model)
        for owner, parts in self.ledger.by_owner.items():
            out.by_owner[owner] = dict(parts)
        for host, began in self.since.items():
            part = self._charged_part(host)
            if part is not None:
                working = part[1]
                dt = self.last_t - max(began, self.start)
                out.hold(part[0], dt, int(working), int(not working), None)
        return out

    def close(self, end: float) -> None:
        """Count the holds still open up to ``end``; the replay is over."""
        for host in list(self.since):
            self._settle(host, end)


def replay(
    entries: Iterable[tuple[int, RecordEntry, str]],
    start: float,
    end: dict[str, float] | None = None,
    model: RestartModel | None = None,
) -> dict[str, ClusterReplay]:
    """The record replayed per cluster, counting from ``start`` (fleet hours) up to each
    cluster's ``end`` (its fleet time now; the last entry's time when not given)."""
    out: dict[str, ClusterReplay] = {}
    model = model or RestartModel()
    for _, e, cluster in entries:
        rep = out.get(cluster)
        if rep is None:
            rep = out[cluster] = ClusterReplay(start=start, ledger=CostLedger(model))
        rep.apply(e)
    for cluster, rep in out.items():
        rep.close(max(rep.last_t, (end or {}).get(cluster, rep.last_t)))
    return out


def rows(replays: dict[str, ClusterReplay]) -> list[dict[str, Any]]:
    """One row per (cluster, owner): its kind, parts and total (GPU-hours, rounded)."""
    out: list[dict[str, Any]] = []
    for cluster, rep in sorted(replays.items()):
        for owner, parts in sorted(rep.ledger.by_owner.items()):
            row: dict[str, Any] = {
                "cluster": cluster,
                "owner": owner,
                "owner_kind": owner_kind(owner),
            }
            row.update({p: round(parts[p], 3) for p in PARTS})
            row["total"] = round(sum(parts.values()), 3)
            out.append(row)
    return out


def totals_by_kind(replays: dict[str, ClusterReplay]) -> dict[tuple[str, str, str], float]:
    """(cluster, owner kind, part) -> GPU-hours: what the Prometheus counter exports."""
    out: dict[tuple[str, str, str], float] = {}
    for cluster, rep in replays.items():
        for owner, parts in rep.with_open().by_owner.items():
            for part, v in parts.items():
                key = (cluster, owner_kind(owner), part)
                out[key] = out.get(key, 0.0) + v
    return out


def owner_cost(
    replays: dict[str, ClusterReplay], owners: Collection[str], cluster: str | None = None
) -> dict[str, Any]:
    """What ``owners`` (a train, an operation, a campaign and the operations it ran) cost the
    jobs over the replayed record: parts, total, stops and, for the jobs they stopped, the ETTR
    points lost: 100 x what those stops cost the jobs (lost work and restarts) over the jobs'
    GPU-hours from their first start to their end (or the record's last entry). Only
    ``cluster``'s when given."""
    parts = dict.fromkeys(PARTS, 0.0)
    cost_to_jobs = 0.0
    spans: dict[tuple[str, int], float] = {}
    for name, rep in replays.items():
        if cluster is not None and name != cluster:
            continue
        ledger = rep.with_open()
        for owner in owners:
            for part, v in ledger.by_owner.get(owner, {}).items():
                parts[part] += v
            for job, cost in rep.touched.get(owner, {}).items():
                span = rep.jobs.get(job)
                cost_to_jobs += cost
                spans[name, job] = span.gpu_hours(rep.last_t) if span is not None else 0.0
    wall = sum(spans.values())
    return {
        "parts": {p: round(v, 3) for p, v in parts.items()},
        "total_gpu_hours": round(sum(parts.values()), 3),
        "jobs_stopped": len(spans),
        "ettr_points_lost": round(100.0 * cost_to_jobs / wall, 3) if wall > 0 else 0.0,
    }


class RecordFollower:
    """The record replayed as it grows, for a worker's activities: each read replays only the
    entries after the last one read (threads share it under a lock)."""

    def __init__(self) -> None:
        self.seq = 0
        self.replays: dict[str, ClusterReplay] = {}
        self._lock = threading.Lock()

    def owner_cost(
        self, fleet: FleetBackend, owners: Collection[str], cluster: str | None = None
    ) -> dict[str, Any]:
        """``owner_cost`` of ``owners`` (in ``cluster`` only, when given) over the fleet's
        record up to its last entry."""
        with self._lock:
            for seq, e, cluster in fleet.records(since=self.seq):
                rep = self.replays.get(cluster)
                if rep is None:
                    rep = self.replays[cluster] = ClusterReplay()
                rep.apply(e)
                self.seq = seq
            return owner_cost(self.replays, owners, cluster)
