"""Activities of the maintenance train: the only code that touches the fleet backend.

Each activity is one fleet transaction at the caller's ``wall`` time (workflow.now()), so the
fleet and the workflow agree on the clock. All are idempotent, because Temporal may run an
activity again after a worker dies: cordoning a host we already hold, updating a host already on
target, or verifying a host already returned all succeed without doing anything twice. Planning
decisions come from ``orchestrator.planning.train_plan``, the same functions the simulator uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orchestrator import metrics
from orchestrator.execution.messages import (
    AdvanceClockRequest,
    ClockInfo,
    CycleCounts,
    DrainStatus,
    EvictRequest,
    EvictResult,
    FleetInfoRequest,
    HostsRequest,
    JobWait,
    UpdateResult,
    VerifyResult,
)
from orchestrator.fleet import dynamics
from orchestrator.fleet.cluster_sim import ClusterSim, HostRec
from orchestrator.fleet.sqlite_fleet import MAX_SPEED, SqliteFleet
from orchestrator.models import HostState
from orchestrator.planning import train_plan
from orchestrator.planning.snapshot import job_view, snapshot
from orchestrator.train.types import PlanDomainRequest, PlanDomainResult

S = HostState
REPAIR_RETURN = "repair-return"
INSTALL_ATTEMPTS = 3
_HELD = (S.CORDONED, S.DRAINING, S.IN_MAINTENANCE, S.VERIFYING)


def is_due(h: HostRec, cycle_started: float) -> bool:
    """Still to visit this cycle: in service and not yet visited, or back from repair with
    pending updates (whenever it was last visited: it must not serve before they are applied)."""
    if h.owner == REPAIR_RETURN:
        return True
    fresh = h.last_visit is not None and h.last_visit >= cycle_started
    return h.state == S.IN_SERVICE and not fresh


def cycle_counts(sim: ClusterSim, cycle_started: float, owner: str) -> CycleCounts:
    """Visit-cycle figures: visited = returned by a train since the cycle began."""
    c = CycleCounts(hosts_total=len(sim.hosts), fleet_hours=sim.now)
    for h in sim.hosts.values():
        if h.state == S.QUARANTINED:
            c.quarantined += 1
        elif h.state == S.IN_REPAIR:
            c.in_repair += 1
        elif h.owner == owner:
            c.in_flight += 1
        elif is_due(h, cycle_started):
            c.due += 1
        elif h.state == S.IN_SERVICE:
            c.visited += 1
        else:
            c.due += 1  # held by another campaign: still to visit
        c.out_of_service += h.state != S.IN_SERVICE
    return c


class FleetAccess:
    """One fleet file shared by an activity class: a SQLite connection per worker thread, and
    errors that will not heal (no fleet, unknown cluster) raised as non-retryable."""

    def __init__(self, fleet_path: Path) -> None:
        self.fleet_path = fleet_path
        self._local = threading.local()

    @property
    def fleet(self) -> SqliteFleet:
        fleet = getattr(self._local, "fleet", None)
        if fleet is None:
            try:
                fleet = SqliteFleet(self.fleet_path)
            except FileNotFoundError as err:
                raise ApplicationError(str(err), type="NoFleet", non_retryable=True) from None
            self._local.fleet = fleet
        return fleet

    def _cluster(self, name: str, wall: datetime):  # type: ignore[no-untyped-def]
        try:
            return self.fleet.cluster(name, wall)
        except KeyError as err:
            raise ApplicationError(str(err), type="UnknownCluster", non_retryable=True) from None


class FleetActivities(FleetAccess):
    """Train activities: plan, drain, evict, update, verify, return, hand back."""

    @activity.defn(name="fleet_info")
    def fleet_info(self, req: FleetInfoRequest) -> ClockInfo:
        fleet = self.fleet
        if req.cluster not in fleet.cluster_names():
            raise ApplicationError(
                f"cluster: unknown cluster {req.cluster!r}",
                type="UnknownCluster",
                non_retryable=True,
            )
        hosts = fleet.preset.hosts_per_cluster
        return ClockInfo(speed=fleet.speed, anchor_wall=fleet.anchor_wall, hosts_total=hosts)

    @activity.defn(name="advance_clock")
    def advance_clock(self, req: AdvanceClockRequest) -> float:
        return self.fleet.advance_clock(req.target_hours)

    @activity.defn(name="plan_domain")
    def plan_domain(self, req: PlanDomainRequest) -> PlanDomainResult:
        """Choose the next hosts with the shared planner and cordon them, atomically."""
        with self._cluster(req.cluster, req.wall) as sim:
            sim.set_targets(req.targets, req.owner)
            limit = req.budget.limit(len(sim.hosts))
            result = PlanDomainResult(limit=limit)
            # Hosts we hold but the workflow does not know about (a retried activity that had
            # committed before its worker died) are handed back first, never forgotten.
            known = set(req.in_flight)
            orphans = [
                h.name
                for h in sim.hosts.values()
                if h.owner == req.owner
                and h.state in (S.CORDONED, S.DRAINING)
                and h.name not in known
            ]
            due = {h.name for h in sim.hosts.values() if is_due(h, req.cycle_started_hours)}
            held = sum(1 for h in sim.hosts.values() if h.owner == req.owner and h.state in _HELD)
            slots = req.max_held - held
            if slots > 0:
                hosts, jobs = snapshot(sim, due)
                b = req.budget
                plan = train_plan.choose_domain(
                    hosts,
                    jobs,
                    sim.now,
                    train_plan.BudgetView(limit, b.per_rack, b.per_zone),
                    slots,
                    req.max_wait_hours,
                    req.policy,
                )
                for name in plan.hosts:
                    if sim.cordon(name, req.owner, req.owner, limit, b.per_rack, b.per_zone):
                        result.hosts.append(name)
                result.waiting = plan.waiting
                result.retry_at_hours = plan.retry_at_hours
            result.hosts = orphans + result.hosts
            result.counts = cycle_counts(sim, req.cycle_started_hours, req.owner)
        return result

    @activity.defn(name="drain_status")
    def drain_status(self, req: HostsRequest) -> DrainStatus:
        """Which of our cordoned hosts are free of jobs, and what to do about the jobs left."""
        with self._cluster(req.cluster, req.wall) as sim:
            out = DrainStatus(fleet_hours=sim.now)
            jobs: dict[int, list[str]] = {}
            for name in req.hosts:
                h = sim.hosts[name]
                if h.owner != req.owner or h.state not in _HELD:
                    out.lost[name] = (
                        f"{h.state}: {h.reason}" if h.state != S.IN_SERVICE else "released"
                    )
                elif h.job_id is None:
                    out.ready.append(name)
                else:
                    sim.start_drain(name, req.owner)
                    jobs.setdefault(h.job_id, []).append(name)
            for job_id, names in sorted(jobs.items()):
                step = train_plan.drain_step(
                    job_view(sim, job_id), sim.now, req.deadline_hours, req.policy
                )
                out.waits.append(
                    JobWait(job_id=job_id, hosts=names, action=step.action, at_hours=step.at_hours)
                )
        return out

    @activity.defn(name="evict_jobs")
    def evict_jobs(self, req: EvictRequest) -> EvictResult:
        with self._cluster(req.cluster, req.wall) as sim:
            out = EvictResult()
            for job_id in req.job_ids:
                job = sim.jobs.get(job_id)
                if job is None or job.state != "running":
                    continue  # already gone: ended, or evicted by an earlier attempt
                # Under a logical clock ('max' speed) other waiters may have moved time past
                # the checkpoint this eviction was planned for: it takes effect as planned.
                as_of = req.scheduled_hours.get(job_id) if self.fleet.speed == MAX_SPEED else None
                out.lost_gpu_hours += sim.evict(job_id, req.owner, as_of=as_of)
                out.interrupted += 1
                metrics.JOBS_INTERRUPTED.labels(req.cluster).inc()
        return out

    @activity.defn(name="apply_updates")
    def apply_updates(self, req: HostsRequest) -> UpdateResult:
        """Install every pending update in dependency order, with one reboot, on each host."""
        with self._cluster(req.cluster, req.wall) as sim:
            out = UpdateResult(fleet_hours=sim.now)
            for name in req.hosts:
                activity.heartbeat(name)
                h = sim.hosts[name]
                if h.owner != req.owner or not sim.begin_update(name, req.owner):
                    out.failed[name] = f"not ours to update ({h.state}, owner {h.owner or '-'})"
                    continue
                pending = dynamics.pending_components(h.versions, req.targets)
                for attempt in range(INSTALL_ATTEMPTS):
                    res = sim.apply_updates(name, req.targets, req.owner, f"{attempt}")
                    if res.ok or res.permanent:
                        break
                if res.ok:
                    out.updated.append(name)
                    out.duration_hours = max(
                        out.duration_hours, dynamics.maintenance_hours(pending)
                    )
                else:
                    kind = "permanently" if res.permanent else f"{INSTALL_ATTEMPTS} times"
                    out.failed[name] = f"update of {res.failed_component} failed {kind}"
                    metrics.UPDATE_FAILURES.labels(req.cluster, res.failed_component or "").inc()
        return out

    @activity.defn(name="verify_and_return")
    def verify_and_return(self, req: HostsRequest) -> VerifyResult:
        """Verify each host; return the healthy ones to service, quarantine the rest."""
        with self._cluster(req.cluster, req.wall) as sim:
            return self._verify_and_return(sim, req)

    def _verify_and_return(self, sim: ClusterSim, req: HostsRequest) -> VerifyResult:
        out = VerifyResult()
        for name in req.hosts:
            h = sim.hosts[name]
            if h.state == S.IN_SERVICE and h.owner != req.owner:
                out.returned.append(name)  # an earlier attempt returned it already
                continue
            if h.state == S.QUARANTINED:
                out.quarantined[name] = h.reason
                continue
            if h.owner != req.owner:
                out.quarantined[name] = f"left maintenance: {h.state} {h.reason}"
                continue
            ok, why, _ = sim.verify(name, req.targets, req.owner)
            if ok and sim.return_to_service(name, req.owner, visit=req.visit):
                out.returned.append(name)
                metrics.VISITS.labels(sim.name).inc()
            else:
                sim.quarantine(name, req.owner, f"verification failed: {why}")
                out.quarantined[name] = why
                metrics.QUARANTINES.labels(sim.name).inc()
        return out

    @activity.defn(name="quarantine_hosts")
    def quarantine_hosts(self, req: HostsRequest) -> VerifyResult:
        with self._cluster(req.cluster, req.wall) as sim:
            out = VerifyResult()
            for name in req.hosts:
                if sim.hosts[name].owner == req.owner:
                    sim.quarantine(name, req.owner, req.reason or "quarantined by maintenance")
                    metrics.QUARANTINES.labels(sim.name).inc()
                out.quarantined[name] = sim.hosts[name].reason
            return out

    @activity.defn(name="release_hosts")
    def release_hosts(self, req: HostsRequest) -> VerifyResult:
        """Hand back every host ``owner`` holds: untouched ones to service, touched ones verified.

        Called when a visit is cancelled or a campaign ends, so no host stays cordoned and
        forgotten. With an empty host list it sweeps the whole cluster for the owner's hosts.
        """
        with self._cluster(req.cluster, req.wall) as sim:
            names = req.hosts or [h.name for h in sim.hosts.values() if h.owner == req.owner]
            out = VerifyResult()
            touched = []
            for name in names:
                h = sim.hosts[name]
                if h.owner != req.owner:
                    continue
                if h.state in (S.CORDONED, S.DRAINING):
                    sim.release(name, req.owner)
                    out.returned.append(name)
                elif h.state in (S.IN_MAINTENANCE, S.VERIFYING):
                    touched.append(name)
            if touched:
                verified = self._verify_and_return(sim, req.model_copy(update={"hosts": touched}))
                out.returned += verified.returned
                out.quarantined.update(verified.quarantined)
            return out

    @activity.defn(name="close_owner")
    def close_owner(self, req: HostsRequest) -> VerifyResult:
        """Release whatever the owner still holds, then record that it has ended."""
        out = self.release_hosts(req.model_copy(update={"hosts": []}))
        with self._cluster(req.cluster, req.wall) as sim:
            sim.close_owner(req.owner, req.owner)
        return out

    def all(self) -> list[Callable[..., object]]:
        return [
            self.fleet_info,
            self.advance_clock,
            self.plan_domain,
            self.drain_status,
            self.evict_jobs,
            self.apply_updates,
            self.verify_and_return,
            self.quarantine_hosts,
            self.release_hosts,
            self.close_owner,
        ]
