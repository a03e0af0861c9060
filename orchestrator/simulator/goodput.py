"""What users get from the cluster over a fixed horizon: goodput, ETTR and the maintenance bill.

Read from the fleet's own event log, as ``Tally`` is: every job run from its ``job_start`` to its
``job_end`` or ``job_interrupted`` is running time; of it, the restart at its start (a requeued
job's reschedule, initialisation and checkpoint load, ``JobScheduler.restart_hours``) and the work
since its last checkpoint when it is stopped are not progress. ``goodput_gpu_hours`` is the rest,
summed over all jobs and their GPUs up to the horizon (work done since the last checkpoint of a job
still running at the horizon counts: both runs compared end at the same instant).

The engine adds, instant by instant, what its train holds: hosts installing and verifying (the
maintenance work), of them those no queued job could have used (``hidden``: giving them back would
have started nothing). What maintenance cost the jobs is kept by the one cost code
(``planning.cost.CostLedger``, in ``cost``): capacity held while a queued job could have used
it, and the lost work and restart of every stop maintenance caused. Checkpoint writes
(``RestartModel.checkpoint_write_hours`` each, every ``ckpt_hours`` of a run's progress) are
not progress either.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.contracts.models import GPUS_PER_HOST
from orchestrator.fleet.cluster_sim import ClusterSim, Event
from orchestrator.planning.cost import CostLedger, RestartModel

#: ETTR buckets by job size in hosts: (name, smallest, largest).
BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("le8", 1, 8),
    ("9-64", 9, 64),
    ("65-512", 65, 512),
    ("gt512", 513, math.inf),
)
#: Job sizes (hosts) whose mean time to failure is reported: 8, 1,024 and 16,384 GPUs.
MTTF_SIZES = (1, 128, 2048)


def bucket_of(hosts: int) -> str:
    return next(name for name, lo, hi in BUCKETS if lo <= hosts <= hi)


@dataclass
class Goodput:
    """Running goodput figures of one run (see the module docstring)."""

    started: float
    pinned: int | None = None
    model: RestartModel = field(default_factory=RestartModel)
    intervals: dict[int, float] = field(default_factory=dict)
    """Job -> its checkpoint interval (hours of progress)."""
    jobs: Mapping[int, Any] = field(default_factory=dict)
    """The cluster's jobs (``JobRec``), where a starting job's interval is read."""
    open: dict[int, tuple[float, float, int]] = field(default_factory=dict)
    """Job -> (its run's start event, restart phase hours, hosts)."""
    first: dict[int, float] = field(default_factory=dict)
    ended: dict[int, float] = field(default_factory=dict)
    size: dict[int, int] = field(default_factory=dict)
    productive: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    running_by_size: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    failures_by_size: Counter[int] = field(default_factory=Counter)
    restart_spent: float = 0.0
    cause: dict[int, str] = field(default_factory=dict)
    """Job -> the cause of its last stop: the restart its next run pays is that stop's."""
    lost_all: float = 0.0
    writes: float = 0.0
    cost: CostLedger = field(default_factory=CostLedger)
    maint_interruptions: int = 0
    failure_interruptions: int = 0
    pinned_causes: Counter[str] = field(default_factory=Counter)
    pinned_interruptions: int = 0
    #: GPU-hours: maintenance work (installing, verifying), of it hidden in idle
    work: float = 0.0
    hidden: float = 0.0

    @classmethod
    def start(
        cls, sim: ClusterSim, pinned: int | None = None, model: RestartModel | None = None
    ) -> Goodput:
        model = model or RestartModel()
        g = cls(started=sim.now, pinned=pinned, model=model, cost=CostLedger(model))
        g.jobs = sim.jobs
        for job in sim._index.running.values():
            g.intervals[job.id] = job.ckpt_hours
            g.open[job.id] = (sim.now, 0.0, job.size)
            g.first[job.id] = sim.now
            g.size[job.id] = job.size
        return g

    def read(self, e: Event) -> None:
        if e.kind not in ("job_start", "job_end", "job_interrupted"):
            return
        d = e.detail
        jid = int(d["job"])
        if e.kind == "job_start":
            n = len(d["hosts"])
            self.open[jid] = (e.t, float(d.get("restart_hours", 0.0)), n)
            self.first.setdefault(jid, e.t)
            self.size[jid] = n
            job = self.jobs.get(jid)
            if job is not None:
                self.intervals[jid] = job.ckpt_hours
            return
        run = self.open.pop(jid, None)
        if run is None:
            return
        t0, phase, n = run
        span = max(0.0, e.t - t0)
        self.running_by_size[n] += span
        if e.kind == "job_end":
            spent = min(span, phase)
            self.ended[jid] = e.t
            self._progress(jid, n, span - spent, spent)
            return
        spent = float(d.get("restart_gpu_hours", 0.0)) / (n * GPUS_PER_HOST)
        lost = float(d.get("lost_gpu_hours", 0.0))
        self.lost_all += lost
        self._progress(jid, n, max(0.0, span - spent - lost / (n * GPUS_PER_HOST)), spent)
        cause = str(d.get("cause", ""))
        self.cause[jid] = cause
        if self.cost.stop(d) is not None:
            self.maint_interruptions += 1
        elif cause.startswith("failure:"):
            self.failure_interruptions += 1
            self.failures_by_size[n] += 1
            if jid == self.pinned:
                self.pinned_interruptions += 1
                self.pinned_causes[cause.partition(":")[2]] += 1

    def _progress(self, jid: int, hosts: int, hours: float, restart_hours: float) -> None:
        """A run of ``jid`` closed: its progress less the checkpoints it wrote, and the restart
        it paid."""
        writes = self.model.writes_hours(hours, self.intervals.get(jid, 0.0))
        self.productive[jid] += hours - writes
        self.writes += writes * hosts * GPUS_PER_HOST
        self.restart_spent += restart_hours * hosts * GPUS_PER_HOST

    def accrue(self, dt: float, working: int, hidden: float) -> None:
        if dt <= 0:
            return
        self.work += dt * working * GPUS_PER_HOST
        self.hidden += dt * hidden * GPUS_PER_HOST

    def close(self, now: float) -> None:
        """Count the runs still open at the horizon ``now`` (restart spent so far, the rest
        progress)."""
        for jid, (t0, phase, n) in list(self.open.items()):
            span = max(0.0, now - t0)
            self.running_by_size[n] += span
            spent = min(span, phase)
            self._progress(jid, n, span - spent, spent)
        self.open.clear()

    def goodput_gpu_hours(self) -> float:
        return sum(h * self.size[j] * GPUS_PER_HOST for j, h in self.productive.items())

    def ettr(self, now: float) -> dict[str, float | None]:
        """Productive time / wall time (first start to end, or to the horizon) per bucket."""
        prod: defaultdict[str, float] = defaultdict(float)
        wall: defaultdict[str, float] = defaultdict(float)
        for jid, first in self.first.items():
            b = bucket_of(self.size[jid])
            wall[b] += max(0.0, self.ended.get(jid, now) - first)
            prod[b] += self.productive.get(jid, 0.0)
        return {
            name: (round(prod[name] / wall[name], 4) if wall[name] > 0 else None)
            for name, _, _ in BUCKETS
        }

    def mttf_hours(self) -> dict[str, float | None]:
        """Running hours per failure interruption, for jobs of 1, 128 and 2,048 hosts."""
        return {
            f"{n * GPUS_PER_HOST}_gpus": (
                round(self.running_by_size[n] / self.failures_by_size[n], 2)
                if self.failures_by_size[n]
                else None
            )
            for n in MTTF_SIZES
        }

    def pinned_report(self, hosts: int, days: float, horizon_hours: float) -> dict[str, Any]:
        """The pinned job over the horizon (its ETTR: productive hours over the horizon's)."""
        total = self.pinned_interruptions
        shares = {
            cause: round(100.0 * count / total, 1)
            for cause, count in self.pinned_causes.most_common()
        }
        assert self.pinned is not None
        return {
            "hosts": hosts,
            "days": days,
            "unexpected_interruptions": total,
            "hours_per_interruption": round(horizon_hours / total, 2) if total else None,
            "cause_share_percent": shares,
            "ettr": round(self.productive.get(self.pinned, 0.0) / horizon_hours, 4),
        }
