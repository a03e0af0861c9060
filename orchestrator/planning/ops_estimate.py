"""How long a bulk operation's waves take and what they cost, replayed on a snapshot's jobs.

``estimate_waves`` replays the waves of one cluster in sequence with the drain's own rules: a
wave waits for its jobs as ``drain_step`` decides (end within ``drain.max_wait``, else evict
after the next checkpoint), then spends the longest maintenance time of its hosts; it adds up
GPU-hours out of service and work lost since a checkpoint. A job that answers "not now"
(``ClusterSnapshot.refusing``) is not stopped by its first wave when the drain hands refusing
jobs back (``DrainModel.release``, as ``DrainTracker`` does): its hosts go to the end, in the
last wave if it has room or in one more wave, where its refusals are spent and it is stopped.

Today's jobs are not all the jobs a wave meets. A host of a later wave that is idle when the
wave comes (idle today, its job ended, or freed when a job split across waves was stopped) has
most likely been given a new job meanwhile: the scheduler keeps a cluster about as busy as it
is now. ``Forecast`` takes the cluster's rates from the snapshot (busy share, jobs per busy
host, share of jobs that outlast ``max_wait``) and expects that many new jobs on such hosts,
that share of them interrupted; and a job a wave stops goes back to the head of the queue and
may restart on a later wave's hosts, to be stopped again. The figures are therefore ranges:
today's jobs as replayed, plus the expected new ones (``spread``: the interruption range's high
end is at most twice its low end plus two).

``maintenance_hours_by_host`` is the maintenance time per host (``updates.maintenance_hours``
of its pending components). It is separate from packing because both the packer's waves and
the single-wave check of ``consistency: cluster`` are estimated the same way, and because the
figures are a model of time, not of the budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.contracts import updates as dyn
from orchestrator.contracts.models import GPUS_PER_HOST, HostState
from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.planning.ops_result import Wave
from orchestrator.planning.train_plan import drain_step


@dataclass(frozen=True)
class DrainModel:
    """The drain rules the operation's waves run by (``WaveSequence``'s ``DrainTracker``)."""

    wait: float  # drain.max_wait, hours
    #: a refusing job's hosts go back to a later wave (negotiating, not a cluster cut-over,
    #: and at least two refusals honoured: the first visit's is then never the last)
    release: bool = False


def drain_model(spec: OperationSpec) -> DrainModel:
    d = spec.drain
    release = d.negotiate and spec.consistency != "cluster" and d.max_refusals >= 2
    return DrainModel(d.max_wait_hours, release)


#: Jobs per host that land on hosts freed before their wave, at the least: freed hosts come a
#: few at a time, so the jobs that fill them are mostly small ones (on the simulated trace of
#: ``multi``, 6 jobs on 16 hosts freed by one stopped 32-host job); a cluster running a few
#: large jobs today would otherwise promise almost none.
FRESH_JOBS_PER_HOST = 0.3


#: Of the jobs that start on a freed host, the share that outlasts the drain's wait at the
#: least: a new job has its whole run ahead of it (the simulated trace's median runs are 5 h
#: and longer), where today's share counts jobs near their end.
NEW_LONG_SHARE = 0.9


@dataclass(frozen=True)
class Forecast:
    """What a host idle before its wave holds when the wave comes, from today's cluster."""

    busy_share: float  # of the hosts in service, the share running a job
    jobs_per_host: float  # running jobs per busy host
    long_share: float  # of the running jobs, the share that outlast drain.max_wait
    checkpoint_hours: float  # mean checkpoint interval: a new job's drain waits half of it
    serving: int = 0  # hosts in service

    @classmethod
    def of(cls, snap: ClusterSnapshot, wait: float) -> Forecast:
        serving = [h for h in snap.hosts if h.state == HostState.IN_SERVICE]
        busy = sum(1 for h in serving if h.job_id is not None)
        jobs = list(snap.jobs.values())
        if not busy or not jobs:
            return cls(0.0, 0.0, 0.0, 0.0)
        long = sum(1 for j in jobs if j.end_hours - snap.now > wait)
        ckpt = [j.next_checkpoint_hours - j.last_checkpoint_hours for j in jobs]
        return cls(
            busy / max(1, len(serving)),
            max(len(jobs) / busy, FRESH_JOBS_PER_HOST),
            long / len(jobs),
            sum(c for c in ckpt if c > 0) / max(1, sum(1 for c in ckpt if c > 0)),
            len(serving),
        )

    def interrupted(self, idle_hosts: int) -> float:
        """New jobs expected on ``idle_hosts`` hosts that the wave will stop."""
        long = max(self.long_share, NEW_LONG_SHARE)
        return idle_hosts * self.busy_share * self.jobs_per_host * long

    def stopped_again(self, stopped: int, later_hosts: int) -> float:
        """Of ``stopped`` jobs, those expected to restart on hosts of a later wave (a stopped
        job goes back to the head of the queue and starts on the first hosts free, which
        are later waves' as often as any others) and be stopped there again."""
        return stopped * min(1.0, later_hosts / max(1, self.serving)) * self.long_share


@dataclass
class Estimate:
    waves: list[Wave]
    hours: float = 0.0
    gpu_out: float = 0.0
    gpu_lost: float = 0.0
    #: new jobs the waves are expected to stop besides today's (``Forecast``)
    expected_new: float = 0.0
    #: hours new jobs may add to the drains
    extra_hours: float = 0.0
    #: today's jobs stopped, counting one a refusal sends to a later wave
    interrupted: int = 0


@dataclass
class _Replay:
    snap: ClusterSnapshot
    drain: DrainModel
    forecast: Forecast
    est: Estimate = field(default_factory=lambda: Estimate([]))
    t: float = 0.0
    seen: set[int] = field(default_factory=set)
    #: host -> when it was freed (a split job's stop) before its wave
    freed: dict[str, float] = field(default_factory=dict)
    #: refusing jobs' hosts handed back to the end, and the jobs
    later: list[HostView] = field(default_factory=list)
    refused: set[int] = field(default_factory=set)


def estimate_waves(
    snap: ClusterSnapshot,
    bins: list[list[HostView]],
    maint: Mapping[str, float],
    wait: float,
    drain: DrainModel | None = None,
    cap: int | None = None,
) -> Estimate:
    """Replay the waves of one cluster in sequence on the snapshot's jobs (see the module)."""
    r = _Replay(snap, drain or DrainModel(wait), Forecast.of(snap, wait), t=snap.now)
    order = {h.name: i for i, h in enumerate(snap.hosts)}
    bins = [list(b) for b in bins]
    index = 0
    while index < len(bins):
        hosts = _hand_back_refusers(r, bins[index]) if r.drain.release else bins[index]
        if hosts:
            _replay_wave(r, hosts, len(r.est.waves), order, maint)
            stopped = len(r.est.waves[-1].jobs_interrupted)
            later = sum(len(b) for b in bins[index + 1 :])
            r.est.expected_new += r.forecast.stopped_again(stopped, later)
        elif bins[index]:  # every host handed back: the wave asked, and ends there
            r.est.waves.append(Wave(index=len(r.est.waves), cluster=snap.name, hosts=[]))
        if r.later and r.est.waves:
            r.est.waves[-1].asked = sorted((h.name for h in r.later), key=order.__getitem__)
        if r.later:  # the refusers' hosts: in the last wave if it is still to come and has
            # room, else in one more
            last = index < len(bins) - 1 and (cap is None or len(bins[-1]) + len(r.later) <= cap)
            if last:
                bins[-1] = bins[-1] + r.later
            else:
                bins.append(list(r.later))
            r.later = []
        index += 1
    r.est.hours = r.t - snap.now
    return r.est


def _hand_back_refusers(r: _Replay, hosts: list[HostView]) -> list[HostView]:
    """The wave's hosts less those of refusing jobs met for the first time (to ``r.later``)."""
    keep = []
    for h in hosts:
        jid = h.job_id
        job = r.snap.jobs.get(jid) if jid is not None else None
        first = jid in r.snap.refusing and jid not in r.refused and jid not in r.seen
        if job is not None and first and job.at(r.t) is not None:
            step = drain_step(job.at(r.t) or job, r.t, r.t + r.drain.wait)
            if step.action != "wait_end":
                r.later.append(h)
                continue
        keep.append(h)
    r.refused.update(h.job_id for h in r.later if h.job_id is not None)
    return keep


def _replay_wave(
    r: _Replay, hosts: list[HostView], index: int, order: dict[str, int], maint: Mapping[str, float]
) -> None:
    """One wave at ``r.t``: its jobs' drains, new jobs on hosts idle till then, maintenance."""
    est, snap, t = r.est, r.snap, r.t
    release: dict[int, float] = {}
    interrupted: list[int] = []
    idle = 0
    for h in hosts:
        jid = h.job_id
        if jid is not None and jid in release:
            continue  # another host of a job this wave already met
        view = snap.jobs.get(jid) if jid is not None else None
        job = view.at(t) if view is not None else None
        if job is None or job.id in r.seen:
            # Idle when the wave comes: a new job most likely runs there by then.
            since = r.freed.get(h.name, snap.now if view is None else min(view.end_hours, t))
            idle += t > since + 1e-9
            continue
        r.seen.add(job.id)
        step = drain_step(job, t, t + r.drain.wait)
        release[job.id] = step.at_hours
        if step.action != "wait_end":
            interrupted.append(job.id)
            last = (job.at(step.at_hours) or job).last_checkpoint_hours
            est.gpu_lost += max(0.0, step.at_hours - last) * job.size * GPUS_PER_HOST
            for name in job.hosts:  # a split job's other hosts are free from now on
                r.freed.setdefault(name, step.at_hours)
    new = r.forecast.interrupted(idle)
    est.expected_new += new
    if new > 0:
        est.extra_hours += min(r.drain.wait, r.forecast.checkpoint_hours / 2)
    est.interrupted += len(interrupted)
    drain_end = max(release.values(), default=t)
    end = drain_end + max(maint[h.name] for h in hosts)
    est.gpu_out += GPUS_PER_HOST * sum(
        end - (t if h.job_id is None else release.get(h.job_id, t)) for h in hosts
    )
    est.waves.append(
        Wave(
            index=index,
            cluster=snap.name,
            hosts=sorted((h.name for h in hosts), key=order.__getitem__),
            jobs_affected=sorted(release),
            jobs_interrupted=interrupted,
            est_start_hours=round(t - snap.now, 3),
            drain_hours=round(drain_end - t, 3),
            est_hours=round(end - t, 3),
        )
    )
    r.t = end


def spread(low: float, expected: float) -> tuple[float, float]:
    """A range around ``low + expected`` as wide as it may be (high at most twice low plus
    two), never below zero: the future beyond today's jobs is uncertain both ways."""
    mid = low + expected
    lo = max(0.0, (2 * mid - 2) / 3)
    return lo, 2 * lo + 2


def count_range(low: int, expected: float) -> tuple[int, int]:
    """``spread`` in whole jobs."""
    lo, _ = spread(low, expected)
    whole = math.floor(lo + 1e-9)
    if 2 * whole + 2 < low + expected:  # rounded down past the expectation: one more
        whole += 1
    return whole, 2 * whole + 2


def maintenance_hours_by_host(spec: OperationSpec, hosts: Sequence[HostView]) -> dict[str, float]:
    """Fleet hours each host spends in maintenance once drained: its pending components with
    one reboot plus verification (a reboot plus verification; nothing for drain-for-repair)."""
    if spec.kind == "reboot":
        return {h.name: dyn.REBOOT_HOURS + dyn.VERIFY_HOURS for h in hosts}
    if spec.kind == "drain-for-repair":
        return {h.name: 0.0 for h in hosts}
    cache: dict[tuple[str, ...], float] = {}
    out = {}
    for h in hosts:
        comps = tuple(c for c, v in spec.targets.items() if h.versions.get(c) != v)
        if comps not in cache:
            cache[comps] = dyn.maintenance_hours(dyn.order_updates(list(comps)))
        out[h.name] = cache[comps]
    return out
