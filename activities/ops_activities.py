"""Activities of bulk operations (OpsPlanner): the fleet side of ``ClusterOperation``.

Each activity is one fleet transaction at the caller's ``wall`` (``workflow.now()``) and is
idempotent, because Temporal runs an activity again after a worker dies: a host already
cordoned by the operation counts as taken, a host already returned counts as passed, a host
already back on its previous versions is not reinstalled. Draining, installing and
quarantining reuse the train's activities (``FleetActivities``), so operations and trains drain
jobs by the very same policy.

Planning a scope, pre-staging and cutting a wave are the execution core's
(``orchestrator.execution.ops_take``, beside the train's ``take``); the activities here adapt
Temporal's requests to it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from temporalio import activity

from activities.fleet_access import FleetAccess, as_application_error
from activities.heartbeat import patient_heartbeat
from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.errors import BadSpec
from orchestrator.contracts.messages import UpdateResult, VerifyOutcome
from orchestrator.contracts.ops_types import (
    CheckRequest,
    ClusterPlanView,
    OperationCheck,
    OpsRequest,
    PrestageResult,
    RollbackRequest,
    TakenWave,
    TakeWaveRequest,
    TargetsRequest,
    VerifyRequest,
)
from orchestrator.execution import baseline, install, ops_take, settle
from orchestrator.execution.baseline import HealthBaseline
from orchestrator.execution.target_checks import hook_refusal
from orchestrator.telemetry import metrics


class OpsActivities(FleetAccess):
    """Bulk-operation activities over the same fleet backend as the train's."""

    def __init__(self, fleet: Path | str | Callable[[], FleetBackend]) -> None:
        super().__init__(fleet)
        #: The last plan of each cluster's operation: the next step takes it while it holds.
        self.plans = ops_take.PlanMemo()

    # ------------------------------------------------------------------ planning
    @activity.defn(name="ops_check")
    def check(self, req: CheckRequest) -> OperationCheck:
        """Plan the whole scope (read-only): which clusters it covers, or why it is refused."""
        try:
            scoped = ops_take.plan_scope(self.fleet, req.spec, req.wall)
        except ValueError as err:
            raise as_application_error(BadSpec(str(err))) from None
        plan, names = scoped.plan, scoped.clusters
        no_hook = hook_refusal(self.fleet, names, req.spec.targets)
        if no_hook is not None:  # a backend that cannot install a target: before any node
            plan.refused = no_hook[1]
        return OperationCheck(
            clusters=[c.cluster for c in plan.clusters if c.hosts_in_scope],
            cluster_waves={c.cluster: c.waves for c in plan.clusters},
            refused=plan.refused,
            waves=len(plan.waves),
            hosts_total=plan.hosts_total,
            hosts_to_change=plan.hosts_to_change,
            estimated_duration_hours=plan.estimated_duration_hours,
        )

    @activity.defn(name="ops_plan_cluster")
    def plan_cluster(self, req: OpsRequest) -> ClusterPlanView:
        """The rest of one cluster's plan as of now, in figures (read-only)."""
        b = self.peek(req.cluster, req.wall)
        return ops_take.cluster_view(
            b, self.plans, req.owner, req.spec, req.since_hours, req.grant, req.planned
        )

    # ------------------------------------------------------------ fleet changes
    @activity.defn(name="ops_set_targets")
    def set_targets(self, req: TargetsRequest) -> None:
        """Record (or, with None, forget) cluster targets: repaired hosts take them first."""
        with self.cluster(req.cluster, req.wall) as b:
            b.set_targets({c: v for c, v in req.targets.items() if v is not None}, req.owner)
            b.unset_targets([c for c, v in req.targets.items() if v is None], req.owner)

    @activity.defn(name="ops_prestage")
    def prestage(self, req: OpsRequest) -> PrestageResult:
        """Download the new packages on every in-service host still to change; none goes out."""
        with self.cluster(req.cluster, req.wall) as b:
            return ops_take.prestage(b, self.plans, req.owner, req.spec)

    @activity.defn(name="ops_take_wave")
    def take_wave(self, req: TakeWaveRequest) -> TakenWave:
        """Cut the next wave from the cluster as it is now and cordon it, atomically."""
        with self.cluster(req.cluster, req.wall) as b:
            wave = ops_take.take_wave(
                b,
                self.fleet,
                self.plans,
                req.owner,
                req.spec,
                req.max_hold,
                req.since_hours,
                req.batch,
                req.planned,
            )
        return wave.model_copy(update={"cost": self.owner_cost(req.owner, req.cluster)})

    @activity.defn(name="ops_verify")
    def verify(self, req: VerifyRequest) -> VerifyOutcome:
        """Verify hosts; return the healthy ones and quarantine the others only if asked."""
        with self.cluster(req.cluster, req.wall) as b:
            out = settle.verify_hosts(b, req.owner, req.hosts, req.targets, req.per_host)
            if req.return_passed:
                back = settle.return_hosts(b, req.owner, out.passed, visit=False)
                out = VerifyOutcome(passed=back.passed, failed={**out.failed, **back.failed})
            if req.quarantine_failed:
                settle.quarantine_hosts(b, req.owner, out.failed, req.reason)
                metrics.QUARANTINES.labels(req.cluster).inc(len(out.failed))
            return out

    @activity.defn(name="ops_check_health")
    def check_health(self, req: VerifyRequest) -> HealthBaseline:
        """Check held hosts before their change; quarantine those already failing.

        Also says the fleet's base rate of failures for changing ``req.targets``' components,
        which the bad-build rule judges the wave's failures against.
        """
        with self.cluster(req.cluster, req.wall) as b:
            out = baseline.check_before_change(b, req.owner, req.hosts, req.reason)
            out.base_rate = b.change_failure_rate(req.targets)
            metrics.QUARANTINES.labels(req.cluster).inc(len(out.unhealthy))
            return out

    @activity.defn(name="ops_return_hosts")
    def return_hosts(self, req: VerifyRequest) -> VerifyOutcome:
        """Put verified hosts back into service (no train visit is recorded)."""
        with self.cluster(req.cluster, req.wall) as b:
            return settle.return_hosts(b, req.owner, req.hosts, visit=False)

    @activity.defn(name="ops_rollback")
    def rollback(self, req: RollbackRequest) -> UpdateResult:
        """Reinstall each host's previous versions (one reboot); hosts already on them pass."""
        with self.cluster(req.cluster, req.wall) as b:
            return install.install_hosts(
                b,
                req.owner,
                dict(sorted(req.previous.items())),
                rollback=True,
                on_host=patient_heartbeat(),
            )

    def all(self) -> list[Callable[..., object]]:
        return [
            self.check,
            self.plan_cluster,
            self.set_targets,
            self.prestage,
            self.take_wave,
            self.verify,
            self.check_health,
            self.return_hosts,
            self.rollback,
        ]
