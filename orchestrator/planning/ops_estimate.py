"""How long a bulk operation's waves take and what they cost, replayed on a snapshot's jobs.

``estimate_waves`` replays the waves of one cluster in sequence: a wave waits for its jobs as the
train's ``drain_step`` would (end within ``drain.max_wait``, else evict after the next
checkpoint), then spends the longest maintenance time of its hosts; it adds up GPU-hours out of
service and work lost since a checkpoint. ``maintenance_hours_by_host`` is that maintenance time
per host (``updates.maintenance_hours`` of its pending components). It is separate from packing
because both the packer's waves and the single-wave check of ``consistency: cluster`` are
estimated the same way, and because the figures are a model of time, not of the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.contracts import updates as dyn
from orchestrator.contracts.models import GPUS_PER_HOST
from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.planning.ops_result import Wave
from orchestrator.planning.train_plan import drain_step


@dataclass
class Estimate:
    waves: list[Wave]
    hours: float = 0.0
    gpu_out: float = 0.0
    gpu_lost: float = 0.0


def estimate_waves(
    snap: ClusterSnapshot, bins: list[list[HostView]], maint: Mapping[str, float], wait: float
) -> Estimate:
    """Replay the waves of one cluster in sequence on the snapshot's jobs."""
    est = Estimate([])
    order = {h.name: i for i, h in enumerate(snap.hosts)}
    t = snap.now
    seen: set[int] = set()
    for index, hosts in enumerate(bins):
        release: dict[int, float] = {}
        interrupted: list[int] = []
        jids = {h.job_id for h in hosts if h.job_id is not None and h.job_id in snap.jobs}
        for jid in sorted(jids):
            if jid in seen:
                continue  # split job: already evicted by an earlier wave
            seen.add(jid)
            job = snap.jobs[jid].at(t)
            if job is None:
                continue
            step = drain_step(job, t, t + wait)
            release[jid] = step.at_hours
            if step.action != "wait_end":
                interrupted.append(jid)
                last = (job.at(step.at_hours) or job).last_checkpoint_hours
                est.gpu_lost += max(0.0, step.at_hours - last) * job.size * GPUS_PER_HOST
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
        t = end
    est.hours = t - snap.now
    return est


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
