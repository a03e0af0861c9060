"""Activities every maintenance owner shares: plan and take a train's domain, drain, evict,
install, verify and settle, quarantine, hand back.

Each activity is one backend transaction at the caller's ``wall`` time (workflow.now()), so the
fleet and the workflow agree on the clock, and each is a thin wrapper over the execution core
(``orchestrator.execution``), which the simulator drives too. All are idempotent, because
Temporal may run an activity again after a worker dies: cordoning a host we already hold,
updating a host already on target, or verifying a host already returned do nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import activity

from activities.arbiter_activities import acquire_grant
from activities.fleet_access import FleetAccess
from activities.heartbeat import patient_heartbeat
from orchestrator.contracts.messages import (
    AskRequest,
    AskResult,
    ClockInfo,
    DrainStatus,
    EvictRequest,
    EvictResult,
    FleetInfoRequest,
    HostsRequest,
    SwitchRequest,
    SwitchResult,
    UpdateResult,
    VerifyResult,
)
from orchestrator.contracts.models import HostState
from orchestrator.contracts.train_spec import riding, train_workflow_id
from orchestrator.contracts.train_types import (
    PlanDomainRequest,
    PlanDomainResult,
    PlanGrantedRequest,
)
from orchestrator.execution import drain, install, settle, switches
from orchestrator.execution.cycle import cycle_counts
from orchestrator.execution.take import AHEAD_OF_TARGET, Taken, take_domain
from orchestrator.execution.target_checks import held_on_bad_version
from orchestrator.fleet import ClusterBackend
from orchestrator.infra.logging import get_logger
from orchestrator.planning.resting import VisitRule
from orchestrator.planning.rollout import RolloutScope, recorded_targets_of
from orchestrator.telemetry import metrics

log = get_logger(__name__)


class FleetActivities(FleetAccess):
    """Train activities, and the drain/install/verify steps bulk operations share with them."""

    @activity.defn(name="fleet_info")
    def fleet_info(self, req: FleetInfoRequest) -> ClockInfo:
        self.require_cluster(req.cluster)
        fleet = self.fleet
        hosts = fleet.hosts_in(req.cluster)
        return ClockInfo(
            speed=fleet.speed,
            anchor_wall=fleet.anchor_wall,
            hosts_total=hosts,
            cluster=req.cluster,
            outside_changes=fleet.outside_changes,
        )

    @activity.defn(name="plan_granted_domain")
    async def plan_granted_domain(self, req: PlanGrantedRequest) -> PlanDomainResult:
        """``arbiter_acquire`` and ``plan_domain`` in one activity (issue 27: one action less
        per plan): ask the cluster's arbiter, then plan and cordon within its grant. Both are
        idempotent, so a retry asks and plans again."""
        info = activity.info()
        grant = await acquire_grant(activity.client(), info.task_queue, req.acquire)
        plan = req.plan.model_copy(update={"max_held": min(req.plan.max_held, grant.granted)})
        res = await asyncio.to_thread(self.plan_domain, plan)
        return res.model_copy(update={"grant": grant})

    @activity.defn(name="plan_domain")
    def plan_domain(self, req: PlanDomainRequest) -> PlanDomainResult:
        """Choose the next hosts with the shared planner and cordon them, atomically.

        A train whose targets (its own, or a campaign's rollout riding it) include a version
        marked bad fleet-wide holds: it takes nothing, records nothing, and says so in
        ``waiting`` until an operator clears the version or changes the target.
        """
        scopes, held, held_back = self._rides(req)
        if held:
            b = self.peek(req.cluster, req.wall)
            return PlanDomainResult(
                waiting=held,
                counts=cycle_counts(b, req.cycle_started_hours, req.owner),
                held_back=held_back,
            )
        with self.cluster(req.cluster, req.wall) as b:
            b.set_targets(recorded_targets_of(req.targets, scopes), req.owner)
            taken = _take(b, req, scopes)
        _record_plan(req, taken)
        return PlanDomainResult(
            cost=self.owner_cost(req.owner),
            hosts=taken.hosts,
            targets=None if taken.targets is None else {**req.targets, **taken.targets},
            waiting=taken.waiting,
            retry_at_hours=taken.retry_at_hours,
            limit=taken.limit,
            counts=taken.counts,
            held_back=held_back,
            checked=taken.checked,
            resting=taken.resting,
            rest_until_hours=taken.rest_until_hours,
            cycle_started_hours=taken.cycle_started_hours,
        )

    def _rides(self, req: PlanDomainRequest) -> tuple[list[RolloutScope], str, dict[str, str]]:
        """The campaigns' rollouts riding this plan, why the train holds ('' if it does not),
        and the campaigns held back (campaign -> why).

        A rollout whose targets hold a version marked bad takes no new domain from now on (its
        campaign's gate sees the mark and fails the stage); the train's own cycle and the other
        campaigns' rollouts go on. A train with nothing else to do holds, saying why."""
        riders = riding(req.rollout, req.rollouts)
        scopes = [RolloutScope.of(r.targets, r.hosts, req.rollout_only, r.failed) for r in riders]
        held = held_on_bad_version(self.fleet, req.targets)
        if req.rollout_only and not scopes:  # a campaign's train between its campaigns' rides
            held = "no campaign rides this train: nothing to visit until one does"
        bad = [held_on_bad_version(self.fleet, dict(scope.targets)) for scope in scopes]
        held_back = {r.campaign: why for r, why in zip(riders, bad, strict=True) if why}
        if any(bad):
            scopes = [scope for scope, why in zip(scopes, bad, strict=True) if not why]
            if req.rollout_only and not scopes:
                held = held or next(why for why in bad if why)
        return scopes, held, held_back

    @activity.defn(name="drain_status")
    def drain_status(self, req: HostsRequest) -> DrainStatus:
        """Which of our cordoned hosts are free of jobs, and what to do about the jobs left."""
        with self.cluster(req.cluster, req.wall) as b:
            return drain.drain_status(
                b, req.owner, req.hosts, req.deadline_hours, req.policy, req.cycle_target_hours
            )

    @activity.defn(name="evict_jobs")
    def evict_jobs(self, req: EvictRequest) -> EvictResult:
        with self.cluster(req.cluster, req.wall) as b:
            out = drain.evict_jobs(b, req.owner, req.job_ids)
        metrics.JOBS_INTERRUPTED.labels(req.cluster).inc(out.interrupted)
        return out

    @activity.defn(name="ask_jobs")
    def ask_jobs(self, req: AskRequest) -> AskResult:
        """Ask each job's owner before evicting it; the answers go into the event record."""
        with self.cluster(req.cluster, req.wall) as b:
            out = drain.ask_jobs(
                b,
                req.owner,
                req.planned,
                req.deadline_hours,
                req.max_refusals,
                req.refusals,
                req.finals,
                req.release,
            )
        return out

    @activity.defn(name="update_switches")
    def update_switches(self, req: SwitchRequest) -> SwitchResult:
        """Update the rack switches above a drained rack's hosts (their blast radius)."""
        with self.cluster(req.cluster, req.wall) as b:
            return switches.update_rack_switches(b, req.owner, req.hosts, req.version)

    @activity.defn(name="apply_updates")
    def apply_updates(self, req: HostsRequest) -> UpdateResult:
        """Install every pending update in dependency order, with one reboot, on each host."""
        with self.cluster(req.cluster, req.wall) as b:
            return self._install(b, req.cluster, req.owner, req.hosts, req.targets)

    @staticmethod
    def _install(
        b: ClusterBackend, cluster: str, owner: str, hosts: list[str], targets: dict[str, str]
    ) -> UpdateResult:
        out = install.install_hosts(
            b, owner, {h: targets for h in hosts}, on_host=patient_heartbeat()
        )
        for comp in out.failed_components.values():
            metrics.UPDATE_FAILURES.labels(cluster, comp).inc()
        return out

    @activity.defn(name="verify_and_return")
    def verify_and_return(self, req: HostsRequest) -> VerifyResult:
        """Verify each host; return the healthy ones to service, quarantine the rest."""
        with self.cluster(req.cluster, req.wall) as b:
            out = settle.verify_and_settle(b, req.owner, req.hosts, req.targets, req.visit)
        _count(req.cluster, out)
        return out

    @activity.defn(name="quarantine_hosts")
    def quarantine_hosts(self, req: HostsRequest) -> VerifyResult:
        reason = req.reason or "quarantined by maintenance"
        whys = {h: req.reasons.get(h) or reason for h in req.hosts}
        with self.cluster(req.cluster, req.wall) as b:
            out = settle.quarantine_hosts(b, req.owner, whys)
            out.quarantined = {h: b.host(h).reason for h in out.quarantined}
        _count(req.cluster, out)
        return out

    @activity.defn(name="release_hosts")
    def release_hosts(self, req: HostsRequest) -> VerifyResult:
        """Hand back every host ``owner`` holds: untouched ones to service, touched ones verified.

        Called when a visit is cancelled or a campaign ends, so no host stays cordoned and
        forgotten. With an empty host list it sweeps the whole cluster for the owner's hosts.
        """
        with self.cluster(req.cluster, req.wall) as b:
            out = settle.hand_back(b, req.owner, req.hosts, req.targets, req.visit)
        _count(req.cluster, out)
        return out

    @activity.defn(name="close_owner")
    def close_owner(self, req: HostsRequest) -> VerifyResult:
        """Release whatever the owner still holds and record that it has ended."""
        with self.cluster(req.cluster, req.wall) as b:
            out = settle.hand_back(b, req.owner, None, req.targets, req.visit)
            b.close_owner(req.owner, req.owner, outcome=req.reason)
        _count(req.cluster, out)
        if req.owner == train_workflow_id(req.cluster):  # a train stopped: no cycle, no budget
            metrics.clear_train(req.cluster)
        return out

    @activity.defn(name="withdraw_claim")
    def withdraw_claim(self, req: HostsRequest) -> None:
        """Withdraw a train's standing claim on freed hosts and hand back the hosts cordoned for
        it outside its domains (``req.hosts``): a paused or halted train holds no idle host
        (its next plan leaves a new claim)."""
        with self.cluster(req.cluster, req.wall) as b:
            b.set_piggyback(None)
            # Hosts cordoned for the claim since its last plan, in no domain: back to service.
            keep = set(req.hosts)
            spare = [
                n
                for n in b.host_names()
                if n not in keep
                and b.host(n).owner == req.owner
                and b.host(n).state == HostState.CORDONED
            ]
            if spare:
                settle.hand_back(b, req.owner, spare, req.targets, False)

    def all(self) -> list[Callable[..., object]]:
        return [
            self.withdraw_claim,
            self.fleet_info,
            self.plan_domain,
            self.plan_granted_domain,
            self.drain_status,
            self.evict_jobs,
            self.ask_jobs,
            self.update_switches,
            self.apply_updates,
            self.verify_and_return,
            self.quarantine_hosts,
            self.release_hosts,
            self.close_owner,
        ]


def _count(cluster: str, out: VerifyResult) -> None:
    """Visits and quarantines for Prometheus (counted once the transaction committed)."""
    metrics.VISITS.labels(cluster).inc(len(out.returned))
    metrics.QUARANTINES.labels(cluster).inc(len(out.quarantined))


def _take(b: ClusterBackend, req: PlanDomainRequest, scopes: list[RolloutScope]) -> Taken:
    """``take_domain`` as the train's request says, inside the caller's transaction."""
    rule = VisitRule(req.targets, scopes, req.verify_every_hours) if req.visit_rule else None
    return take_domain(
        b,
        req.owner,
        req.budget,
        req.cycle_started_hours,
        req.max_held,
        req.max_wait_hours,
        req.policy,
        known=req.in_flight,
        rollouts=scopes,
        switch_target=req.targets.get("switch_firmware"),
        claim_until_hours=req.claim_until_hours,
        cycle_target_hours=req.cycle_target_hours,
        ahead=AHEAD_OF_TARGET,
        rule=rule,
        resting=req.resting,
    )


def _record_plan(req: PlanDomainRequest, taken: Taken) -> None:
    """The plan's figures for Prometheus: piggybacked and checked hosts, budget, cycle."""
    metrics.PIGGYBACKED.labels(req.cluster).inc(len(taken.piggybacked))
    metrics.BUDGET_LIMIT.labels(req.cluster, "max_unavailable").set(taken.limit)
    metrics.BUDGET_LIMIT.labels(req.cluster, "maintenance").set(taken.maintenance)
    metrics.CHECKS.labels(req.cluster).inc(len(taken.checked))
    metrics.record_cycle(
        req.cluster,
        taken.counts,
        taken.cycle_started_hours or req.cycle_started_hours,
        req.cycle_target_hours,
        taken.resting,
    )
