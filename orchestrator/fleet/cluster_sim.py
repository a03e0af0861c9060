"""The simulated cluster: jobs, checkpoints, failures, repairs and host maintenance, in memory.

One ``ClusterSim`` is the whole truth about one cluster at fleet time ``now``. ``advance(t)``
replays what happens until ``t`` (jobs end and start, hosts fail and come back from repair);
the maintenance operations (cordon, evict, update, verify, return) act at ``now``. The SQLite
backend loads a ClusterSim, advances it to the caller's fleet time, applies one operation and
saves it, inside one transaction; the discrete-event simulator drives the very same class with
its own virtual clock. Every state change is appended to ``events`` for the audit log.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.constants import (
    NO_OWNER,
    QUARANTINE_OWNER,
    REPAIR_OWNER,
    REPAIR_RETURN_OWNER,
    UNTOUCHED_STATES,
)
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.backend import InstallOutcome, JobAnswer, RecordEntry, Verification
from orchestrator.models import GPUS_PER_HOST, UPPER_LAYER, HostState
from orchestrator.views import (
    ClusterSnapshot,
    HostView,
    JobView,
    is_due,
    last_checkpoint,
    next_checkpoint,
)

S = HostState
#: States in which a host is powered up and exposed to unexpected failures.
_CAN_FAIL = frozenset({S.IN_SERVICE, S.CORDONED, S.DRAINING})
RESERVE_AFTER_HOURS = 6.0
#: Hours a quarantined host waits for a person to triage it before it goes to repair.
QUARANTINE_TRIAGE_HOURS = 8.0


@dataclass
class HostRec:
    name: str
    zone: str
    rack: str
    state: str
    versions: dict[str, str]
    job_id: int | None = None
    reason: str = ""
    owner: str = ""
    repair_until: float | None = None
    defect: str | None = None
    last_visit: float | None = None
    verified: bool = False
    updates: int = 0


@dataclass
class JobRec:
    id: int
    size: int
    work_hours: float  # remaining work when (re)started
    ckpt_hours: float
    submitted: float
    hosts: list[str] = field(default_factory=list)
    start: float | None = None
    driver: str = ""
    cuda: str = ""
    state: str = "queued"  # queued | running | done
    interruptions: int = 0

    @property
    def end(self) -> float:
        assert self.start is not None
        return self.start + self.work_hours

    def last_checkpoint(self, now: float) -> float:
        assert self.start is not None
        return last_checkpoint(self.start, self.ckpt_hours, now, self.end)

    def next_checkpoint(self, now: float) -> float:
        assert self.start is not None
        return next_checkpoint(self.start, self.ckpt_hours, now, self.end)

    def view(self, now: float) -> JobView:
        return JobView(
            self.id,
            self.size,
            tuple(self.hosts),
            self.end,
            self.next_checkpoint(now),
            self.last_checkpoint(now),
        )


@dataclass
class ClusterState:
    now: float = 0.0
    job_seq: int = 0
    fail_seq: int = 0
    next_failure_at: float = 0.0
    queue: list[int] = field(default_factory=list)
    targets: dict[str, str] = field(default_factory=dict)
    #: "component=version" -> probability that installing it leaves a host bad (a bad build)
    faults: dict[str, float] = field(default_factory=dict)


#: One entry of the fleet's append-only record (the backend interface's shape).
Event = RecordEntry


class ClusterSim:
    """One cluster's hosts and jobs, advanced through fleet time."""

    def __init__(
        self,
        name: str,
        seed: int,
        hosts: list[HostRec],
        jobs: dict[int, JobRec],
        state: ClusterState,
        max_job_hosts: int,
        target_utilisation: float,
    ) -> None:
        self.name = name
        self.seed = seed
        self.hosts = {h.name: h for h in hosts}
        self.order = [h.name for h in hosts]
        self.jobs = jobs
        self.state = state
        self.max_job_hosts = max_job_hosts
        self.target_utilisation = target_utilisation
        self.events: list[Event] = []
        self.dirty_hosts: set[str] = set()
        self.dirty_jobs: set[int] = set()
        self._racks: dict[str, list[str]] = defaultdict(list)
        for h in hosts:
            self._racks[h.rack].append(h.name)
        if state.next_failure_at <= 0.0:
            self._schedule_failure()

    # ------------------------------------------------------------------ clock
    @property
    def now(self) -> float:
        return self.state.now

    def advance(self, t: float) -> None:
        """Replay jobs, failures and repairs up to fleet time ``t`` (never backwards)."""
        while True:
            running = [j for j in self.jobs.values() if j.state == "running"]
            t_end = min((j.end for j in running), default=float("inf"))
            repairs = [h for h in self.hosts.values() if h.repair_until is not None]
            t_rep = min((h.repair_until or 0.0 for h in repairs), default=float("inf"))
            t_fail = self.state.next_failure_at
            t_next = min(t_end, t_rep, t_fail)
            if t_next > t:
                break
            self.state.now = max(self.state.now, t_next)
            if t_next == t_end:
                job = min(running, key=lambda j: j.end)
                self._finish_job(job)
            elif t_next == t_rep:
                self._finish_repair(min(repairs, key=lambda h: h.repair_until or 0.0))
            else:
                self._failure()
            self._fill_and_place()
        self.state.now = max(self.state.now, t)
        self._fill_and_place()

    # ------------------------------------------------------------- internals
    def _log(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self.events.append(Event(self.now, actor, kind, host, detail))

    def _set_state(
        self, h: HostRec, state: str, actor: str, reason: str = "", **extra: Any
    ) -> None:
        if h.state == state and h.reason == reason:
            return
        self._log(actor, "host_state", h.name, before=h.state, after=state, reason=reason, **extra)
        h.state = state
        h.reason = reason
        self.dirty_hosts.add(h.name)

    def _schedule_failure(self) -> None:
        gap = dyn.next_failure_gap(self.seed, self.name, self.state.fail_seq, len(self.order))
        self.state.next_failure_at = self.state.now + gap

    def _failure(self) -> None:
        host, cause, repair = dyn.draw_failure(
            self.seed, self.name, self.state.fail_seq, self.order
        )
        self.state.fail_seq += 1
        self._schedule_failure()
        h = self.hosts[host]
        if h.state not in _CAN_FAIL:
            return  # thinning: hosts down already cannot fail again
        self._log("fleet", "failure", host, cause=cause, repair_hours=round(repair, 3))
        if h.job_id is not None:
            self._interrupt(self.jobs[h.job_id], cause=f"failure:{cause}", actor="fleet")
        h.repair_until = self.now + repair
        h.owner = REPAIR_OWNER
        h.verified = False
        self._set_state(h, S.IN_REPAIR, "fleet", cause)

    def _finish_repair(self, h: HostRec) -> None:
        if h.state == S.QUARANTINED:
            # Triage done: the repair pipeline takes the host (reseat, swap, reflash).
            r = dyn.rng(self.seed, h.name, "quarantine-repair", h.updates)
            h.repair_until = self.now + r.uniform(12.0, 48.0)
            h.owner = REPAIR_OWNER
            self.dirty_hosts.add(h.name)
            self._set_state(h, S.IN_REPAIR, "repair", f"triaged after quarantine: {h.reason}")
            return
        h.repair_until = None
        h.defect = None
        pending = [c for c, v in self.state.targets.items() if h.versions.get(c) != v]
        self.dirty_hosts.add(h.name)
        if pending:
            # Repaired hosts take pending upgrades before they return to production.
            h.owner = REPAIR_RETURN_OWNER
            self._set_state(
                h, S.CORDONED, "repair", "repaired; pending updates " + ",".join(pending)
            )
        else:
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, "repair", "repaired")

    def _finish_job(self, job: JobRec) -> None:
        job.state = "done"
        self.dirty_jobs.add(job.id)
        self._log("scheduler", "job_end", None, job=job.id, hosts=len(job.hosts))
        self._release(job)

    def _release(self, job: JobRec) -> None:
        for name in job.hosts:
            h = self.hosts[name]
            if h.job_id == job.id:
                h.job_id = None
                self.dirty_hosts.add(name)

    def _interrupt(self, job: JobRec, cause: str, actor: str, as_of: float | None = None) -> float:
        """Stop a running job; it loses the work since its last checkpoint and is requeued.

        ``as_of`` (at most now) is when the stop was scheduled: under a logical clock that other
        waiters moved past it, the stop counts from then, as a discrete-event order would have it.
        """
        at = self.now if as_of is None else min(max(as_of, job.start or 0.0), self.now)
        ckpt = job.last_checkpoint(at)
        assert job.start is not None
        lost = (at - ckpt) * job.size * GPUS_PER_HOST
        self._log(
            actor,
            "job_interrupted",
            None,
            job=job.id,
            cause=cause,
            hosts=len(job.hosts),
            lost_gpu_hours=round(lost, 3),
        )
        self._release(job)
        job.work_hours = max(0.01, job.work_hours - (ckpt - job.start))
        job.state, job.start, job.hosts = "queued", None, []
        job.interruptions += 1
        self.state.queue.insert(0, job.id)
        self.dirty_jobs.add(job.id)
        return lost

    def _free_hosts(self) -> dict[tuple[str, str], dict[str, list[str]]]:
        """Idle in-service hosts grouped by (gpu_driver, cuda), then by rack."""
        free: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for h in self.hosts.values():
            if h.state == S.IN_SERVICE and h.job_id is None:
                free[(h.versions["gpu_driver"], h.versions["cuda"])][h.rack].append(h.name)
        return free

    def _fill_and_place(self) -> None:
        """Keep the cluster busy: draw jobs from the trace while below target, place what fits."""
        goal = self.target_utilisation * len(self.order)
        while True:
            busy = sum(1 for h in self.hosts.values() if h.job_id is not None)
            while busy < goal and len(self.state.queue) < 8:
                shape = dyn.draw_job(self.seed, self.name, self.state.job_seq, self.max_job_hosts)
                job_id = self.state.job_seq
                self.state.job_seq += 1
                self.jobs[job_id] = JobRec(
                    job_id,
                    shape.hosts,
                    shape.duration_hours,
                    shape.checkpoint_interval_hours,
                    self.now,
                )
                self.dirty_jobs.add(job_id)
                self.state.queue.append(job_id)
            if not self.state.queue:
                return
            free = self._free_hosts()
            head = self.jobs[self.state.queue[0]]
            # Backfill smaller jobs, but hold hosts for a head job that has waited too long.
            window = 1 if self.now - head.submitted > RESERVE_AFTER_HOURS else 16
            placed = [j for j in list(self.state.queue[:window]) if self._place(self.jobs[j], free)]
            for job_id in placed:
                self.state.queue.remove(job_id)
            if not placed:
                return

    def _place(self, job: JobRec, free: dict[tuple[str, str], dict[str, list[str]]]) -> bool:
        """Gang-place a job on idle hosts of one (driver, cuda) version, as close as possible."""
        fits = [(sum(map(len, racks.values())), key) for key, racks in free.items()]
        fits = [f for f in fits if f[0] >= job.size]
        if not fits:
            return False
        _, key = max(fits)
        racks = free[key]
        by_zone: dict[str, list[str]] = defaultdict(list)
        for rack, names in racks.items():
            if names:
                by_zone[self.hosts[names[0]].zone].append(rack)
        zone_free = {z: sum(len(racks[r]) for r in rs) for z, rs in by_zone.items()}
        zones = sorted(zone_free, key=lambda z: (zone_free[z] < job.size, zone_free[z], z))
        chosen: list[str] = []
        for zone in zones:
            for rack in sorted(by_zone[zone], key=lambda r: (-len(racks[r]), r)):
                need = job.size - len(chosen)
                take = racks[rack][:need]
                del racks[rack][:need]
                chosen.extend(take)
                if len(chosen) == job.size:
                    break
            if len(chosen) == job.size:
                break
        job.hosts, job.start, job.state = chosen, self.now, "running"
        job.driver, job.cuda = key
        for name in chosen:
            self.hosts[name].job_id = job.id
            self.dirty_hosts.add(name)
        self.dirty_jobs.add(job.id)
        self._log(
            "scheduler",
            "job_start",
            None,
            job=job.id,
            hosts=chosen,
            gpu_driver=key[0],
            cuda=key[1],
        )
        return True

    # ------------------------------------------------------ read-only views
    def out_of_service(self) -> list[HostRec]:
        return [h for h in self.hosts.values() if h.state != S.IN_SERVICE]

    def out_of_service_count(self) -> int:
        return sum(1 for h in self.hosts.values() if h.state != S.IN_SERVICE)

    def host_names(self) -> Sequence[str]:
        return self.order

    def host(self, name: str) -> HostRec:
        return self.hosts[name]

    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        return j.view(self.now) if j is not None and j.state == "running" else None

    def recorded_targets(self) -> Mapping[str, str]:
        return self.state.targets

    def snapshot(self, cycle_started_hours: float | None = None) -> ClusterSnapshot:
        """Plain views in inventory order; ``due`` as ``views.is_due`` says for that cycle."""
        c = cycle_started_hours
        hosts = tuple(
            HostView(
                h.name,
                h.rack,
                h.zone,
                str(h.state),
                h.owner,
                h.job_id,
                c is not None and is_due(h, c),
                h.versions,
                h.last_visit,
            )
            for h in (self.hosts[n] for n in self.order)
        )
        now = self.now
        jobs = {jid: j.view(now) for jid, j in self.jobs.items() if j.state == "running"}
        return ClusterSnapshot(self.name, now, len(hosts), hosts, jobs, dict(self.state.targets))

    def record(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self._log(actor, kind, host, **detail)

    def rack_hosts(self, rack: str) -> list[str]:
        return self._racks[rack]

    # ---------------------------------------------------- maintenance ops
    def set_targets(self, targets: Mapping[str, str], actor: str) -> None:
        merged = {**self.state.targets, **targets}
        if merged != self.state.targets:
            self.state.targets = merged
            self._log(actor, "targets", None, targets=merged)

    def cordon(
        self,
        name: str,
        owner: str,
        actor: str,
        limit: int,
        per_rack: int | None = None,
        per_zone: int | None = None,
    ) -> bool:
        """Take a host out of scheduling for ``owner``, only if the budget still allows it.

        The budget is checked here, in the same transaction as the change, counting every host
        out of service for any reason, so a failure that landed since planning is respected.
        """
        h = self.hosts[name]
        if h.owner == REPAIR_RETURN_OWNER and h.state == S.CORDONED:
            h.owner = owner  # the repair pipeline hands a repaired host over for its updates
            self.dirty_hosts.add(name)
            self._log(actor, "handover", name, owner=owner)
            return True
        if h.state != S.IN_SERVICE:
            return False
        down = self.out_of_service()
        if len(down) + 1 > limit:
            return False
        if per_rack is not None and sum(d.rack == h.rack for d in down) + 1 > per_rack:
            return False
        if per_zone is not None and sum(d.zone == h.zone for d in down) + 1 > per_zone:
            return False
        h.owner, h.verified = owner, False
        self._set_state(
            h,
            S.CORDONED,
            actor,
            f"maintenance by {owner}",
            owner=owner,
            limit=limit,
            per_rack=per_rack,
            per_zone=per_zone,
        )
        return True

    def unset_targets(self, components: Sequence[str], actor: str) -> None:
        """Forget recorded targets (an operation that stopped stops pushing its versions)."""
        kept = {c: v for c, v in self.state.targets.items() if c not in components}
        if kept != self.state.targets:
            self.state.targets = kept
            self._log(actor, "targets", None, targets=kept)

    def prestage(self, name: str, targets: Mapping[str, str], actor: str) -> list[str]:
        """Download the packages a host lacks while it stays in service; changes no state."""
        comps = dyn.pending_components(self.hosts[name].versions, targets)
        if comps:
            self._log(actor, "prestaged", name, components={c: targets[c] for c in comps})
        return comps

    def begin_rollback(self, name: str, actor: str) -> bool:
        """Reopen a host whose new versions failed, to reinstall its previous ones.

        Reinstalling the previous software removes what the failed install left behind (the
        defect it drew), which is the point of a rollback; the reinstall draws its own outcome.
        """
        h = self.hosts[name]
        if h.state not in (S.IN_MAINTENANCE, S.VERIFYING) or h.job_id is not None:
            return False
        h.defect, h.verified = None, False
        self.dirty_hosts.add(name)
        self._set_state(h, S.IN_MAINTENANCE, actor, "rolling back")
        return True

    def inject_fault(self, component: str, version: str, rate: float, actor: str) -> None:
        """Make ``component=version`` a bad build that leaves hosts bad with ``rate``."""
        self.state.faults[f"{component}={version}"] = rate
        self._log(actor, "fault_injected", None, component=component, version=version, rate=rate)

    def close_owner(self, owner: str, actor: str) -> None:
        """Record that ``owner`` (a train or operation) holds nothing more and has ended."""
        self._log(actor, "owner_closed", None, owner=owner)

    def job_of(self, name: str) -> JobRec | None:
        jid = self.hosts[name].job_id
        return None if jid is None else self.jobs[jid]

    def ask_job(self, job_id: int, actor: str, evict_at_hours: float) -> JobAnswer:
        """Simulated jobs do not negotiate yet: every job lets maintenance go ahead."""
        return JobAnswer("go")

    def start_drain(self, name: str, actor: str) -> None:
        h = self.hosts[name]
        if h.state == S.CORDONED and h.job_id is not None:
            self._set_state(h, S.DRAINING, actor, "waiting for job")

    def evict(self, job_id: int, actor: str, as_of: float | None = None) -> float:
        """Interrupt a job so its cordoned hosts can be maintained; return GPU-hours lost."""
        job = self.jobs[job_id]
        if job.state != "running":
            return 0.0
        return self._interrupt(job, cause=f"maintenance:{actor}", actor=actor, as_of=as_of)

    def begin_update(self, name: str, actor: str) -> bool:
        h = self.hosts[name]
        if h.state not in (S.CORDONED, S.DRAINING, S.IN_MAINTENANCE) or h.job_id is not None:
            return False
        self._set_state(h, S.IN_MAINTENANCE, actor, "applying updates")
        return True

    def install(
        self, name: str, targets: Mapping[str, str], actor: str, attempt: str
    ) -> InstallOutcome:
        out = self.apply_updates(name, dict(targets), actor, attempt)
        return InstallOutcome(out.ok, out.permanent, out.failed_component)

    def reboot(self, name: str, actor: str) -> None:
        """A plain reboot: the simulated host comes back as it was."""
        self._log(actor, "rebooted", name)

    def apply_updates(
        self, name: str, targets: dict[str, str], actor: str, attempt: str
    ) -> dyn.UpdateOutcome:
        """Install every pending component of ``targets`` in dependency order, one reboot."""
        h = self.hosts[name]
        comps = dyn.pending_components(h.versions, targets)
        out = dyn.draw_update_outcome(self.seed, name, f"{h.updates}:{attempt}", comps)
        h.updates += 1
        self.dirty_hosts.add(name)
        if not out.ok:
            self._log(
                actor,
                "update_failed",
                name,
                component=out.failed_component,
                permanent=out.permanent,
            )
            return out
        before = {c: h.versions.get(c) for c in comps}
        for c in comps:
            h.versions[c] = targets[c]
            rate = self.state.faults.get(f"{c}={targets[c]}", 0.0)
            if rate and dyn.rng(self.seed, name, "fault", c, h.updates).random() < rate:
                out = dyn.UpdateOutcome(True, False, None, "low_bus_bandwidth")
        if out.defect:
            h.defect = out.defect
        self._log(actor, "updated", name, before=before, after={c: targets[c] for c in comps})
        return out

    def verify(self, name: str, targets: Mapping[str, str], actor: str) -> Verification:
        """Hardware diagnostics, collective bandwidth against roofline, version manifest."""
        h = self.hosts[name]
        self._set_state(h, S.VERIFYING, actor, "verifying")
        r = dyn.rng(self.seed, name, "verify", h.updates)
        bw = (
            dyn.DEGRADED_BUS_BW
            if h.defect in ("slow_gpu", "low_bus_bandwidth")
            else dyn.HEALTHY_BUS_BW
        )
        bw += r.uniform(-0.02, 0.02)
        wrong = sorted(c for c, v in targets.items() if h.versions.get(c) != v)
        if h.defect == "xid_errors":
            ok, why = False, "diagnostics: GPU Xid errors under load"
        elif bw < dyn.MIN_BUS_BW:
            ok, why = False, f"collective bandwidth {bw:.2f} of roofline < {dyn.MIN_BUS_BW}"
        elif wrong:
            ok, why = False, "version manifest mismatch: " + ",".join(wrong)
        else:
            ok, why = True, "passed"
        h.verified = ok
        self.dirty_hosts.add(name)
        self._log(actor, "verified", name, passed=ok, reason=why, bus_bw=round(bw, 3))
        return Verification(ok, why, bw)

    def return_to_service(self, name: str, actor: str, visit: bool = True) -> bool:
        """Put a verified host back into service; ``visit`` marks it visited by a train."""
        h = self.hosts[name]
        if not h.verified or h.state != S.VERIFYING:
            return False
        h.owner = NO_OWNER
        if visit:
            h.last_visit = self.now
        self._set_state(h, S.IN_SERVICE, actor, "returned after verification", verified=True)
        return True

    def quarantine(self, name: str, actor: str, reason: str) -> None:
        h = self.hosts[name]
        if h.state == S.IN_REPAIR:
            return  # already held by the repair pipeline
        if h.job_id is not None:
            self._interrupt(self.jobs[h.job_id], cause=f"quarantine:{actor}", actor=actor)
        h.owner = QUARANTINE_OWNER
        # Not a visit: once repaired the host is due again, and verified before it serves.
        h.repair_until = self.now + QUARANTINE_TRIAGE_HOURS
        self._set_state(h, S.QUARANTINED, actor, reason)

    def hand_to_repair(self, name: str, actor: str, reason: str) -> None:
        """Give a host to the repair pipeline now (no triage wait): it returns when repaired."""
        h = self.hosts[name]
        if h.state == S.IN_REPAIR:
            return
        if h.job_id is not None:
            self._interrupt(self.jobs[h.job_id], cause=f"repair:{actor}", actor=actor)
        r = dyn.rng(self.seed, h.name, "hand-to-repair", h.updates)
        h.repair_until = self.now + r.uniform(12.0, 48.0)
        h.owner, h.verified = REPAIR_OWNER, False
        self._set_state(h, S.IN_REPAIR, actor, reason)

    def release(self, name: str, actor: str) -> None:
        """Give back a cordoned host that was never touched (a cancelled or aborted visit)."""
        h = self.hosts[name]
        if h.state in UNTOUCHED_STATES and h.owner not in (REPAIR_OWNER, REPAIR_RETURN_OWNER):
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, actor, "released untouched", verified=True)

    def upper_versions(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for h in self.hosts.values():
            counts[(h.versions["gpu_driver"], h.versions["cuda"])] += 1
        return dict(counts)


assert {"gpu_driver", "cuda"} == UPPER_LAYER
