"""Activities of bulk operations (OpsPlanner): the fleet side of ``ClusterOperation``.

Each activity is one fleet transaction at the caller's ``wall`` (``workflow.now()``) and is
idempotent, because Temporal runs an activity again after a worker dies: a host already
cordoned by the operation counts as taken, a host already returned counts as passed, a host
already back on its previous versions is not reinstalled. Draining, installing and
quarantining reuse the train's activities (``FleetActivities``), so operations and trains drain
jobs by the very same policy.

Waves are cut from the cluster as it is now, not from the plan made at the start: ``take_wave``
plans the rest of the cluster and cordons the first wave in one transaction, with the budget
check of every cordon, so hosts that failed, were repaired or were held by a train meanwhile
simply land in a later wave.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from temporalio import activity

from activities.fleet_access import FleetAccess, as_application_error
from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.errors import BadSpec
from orchestrator.contracts.messages import UpdateResult, VerifyOutcome
from orchestrator.contracts.models import HostState
from orchestrator.contracts.ops_spec import OperationSpec, resolve_clusters
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
from orchestrator.contracts.views import ClusterSnapshot
from orchestrator.execution import baseline, install, settle
from orchestrator.execution.baseline import HealthBaseline
from orchestrator.execution.drain import refusing_hosts
from orchestrator.execution.target_checks import held_on_bad_version, hook_refusal
from orchestrator.planning.ops_plan import OperationPlan, holders_in, plan_operation
from orchestrator.telemetry import metrics

S = HostState


def plan_one(
    spec: OperationSpec, snap: ClusterSnapshot, since: float | None = None, grant: int | None = None
) -> OperationPlan | None:
    """Plan ``spec`` on one cluster (begun at fleet hour ``since``, waves of the arbiter's
    ``grant`` if given); None when none of the scope's hosts are in it."""
    try:
        grants = None if grant is None else {snap.name: grant}
        return plan_operation(spec, {snap.name: snap}, since=since, grants=grants)
    except ValueError:
        return None  # the scope's zone/rack/host patterns name nothing here


def effective_spec(
    spec: OperationSpec, snap: ClusterSnapshot, max_hold: int
) -> tuple[OperationSpec, int | None, int | None]:
    """The spec with its budget capped by the arbiter's grant, and the per-rack/zone limits.

    A ``consistency: cluster`` cut-over (and a drain-for-repair) goes whole or not at all: its
    window is the explicit grant. A job-consistent operation holds at most ``max_hold`` hosts
    beyond those already out of service, and never more than its own budget allows.
    """
    budget = spec.budget
    if spec.window is not None:
        budget = budget.model_copy(update={"max_unavailable": spec.window.max_unavailable})
    if spec.consistency == "cluster":
        return spec, None, None
    if spec.kind == "drain-for-repair":
        return spec, budget.per_rack, budget.per_zone
    limit = budget.limit(snap.hosts_total)
    down = sum(1 for h in snap.hosts if h.state != S.IN_SERVICE)
    cap = min(limit, down + max_hold)
    if cap < limit:
        capped = budget.model_copy(update={"max_unavailable": cap})
        spec = spec.model_copy(update={"budget": capped, "window": None})
    return spec, budget.per_rack, budget.per_zone


class OpsActivities(FleetAccess):
    """Bulk-operation activities over the same fleet backend as the train's."""

    # ------------------------------------------------------------------ planning
    @activity.defn(name="ops_check")
    def check(self, req: CheckRequest) -> OperationCheck:
        """Plan the whole scope (read-only): which clusters it covers, or why it is refused."""
        try:
            names = resolve_clusters(req.spec.scope, self.fleet.cluster_names())
            snaps = {n: self.peek(n, req.wall).snapshot() for n in names}
            plan = plan_operation(req.spec, snaps, holders_in(snaps.values()))
        except ValueError as err:
            raise as_application_error(BadSpec(str(err))) from None
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
        plan = plan_one(req.spec, b.snapshot(), req.since_hours, req.grant)
        if plan is None:
            return ClusterPlanView(fleet_hours=b.now)
        c = plan.clusters[0]
        return ClusterPlanView(
            fleet_hours=b.now,
            refused=plan.refused,
            waiting_for_room=c.waiting_for_room,
            limit=max(1, c.budget_limit),
            hosts_in_scope=c.hosts_in_scope,
            already_done=c.already_done,
            deferred=c.deferred,
            deferred_hosts=list(plan.deferred),
            waves_left=len(plan.waves),
            next_wave=len(plan.waves[0].hosts) if plan.waves else 0,
            estimated_hours=plan.estimated_duration_hours,
            recorded_targets={k: b.recorded_targets().get(k) for k in req.spec.targets},
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
            out = PrestageResult(fleet_hours=b.now)
            plan = plan_one(req.spec, b.snapshot())
            if plan is not None and req.spec.kind != "reboot" and req.spec.targets:
                # The record says what this operation must leave on which hosts: the audit holds
                # a succeeded operation to it.
                waves = [h for w in plan.waves for h in w.hosts]
                scope = sorted({*plan.already_done, *plan.deferred, *waves})
                b.record(
                    req.owner,
                    "operation_scope",
                    None,
                    owner=req.owner,
                    targets=dict(req.spec.targets),
                    hosts=scope,
                )
            for wave in plan.waves if plan else []:
                for name in wave.hosts:
                    if b.host(name).state == S.IN_SERVICE and b.prestage(
                        name, req.spec.targets, req.owner
                    ):
                        out.hosts += 1
            return out

    @activity.defn(name="ops_take_wave")
    def take_wave(self, req: TakeWaveRequest) -> TakenWave:
        """Cut the next wave from the cluster as it is now and cordon it, atomically."""
        with self.cluster(req.cluster, req.wall) as b:
            snap = b.snapshot()
            spec, per_rack, per_zone = effective_spec(req.spec, snap, req.max_hold)
            plan = plan_one(spec, snap, req.since_hours)
            out = TakenWave(fleet_hours=b.now)
            if plan is None:
                return out
            out.limit = max(1, plan.clusters[0].budget_limit)
            if plan.refused or plan.clusters[0].waiting_for_room:
                out.waiting = plan.refused or plan.clusters[0].waiting_for_room or ""
                return out
            held = held_on_bad_version(self.fleet, dict(spec.targets))
            if held:  # a version marked bad since it started: no new wave until cleared
                out.waiting = held
                return out
            out.waves_left = len(plan.waves)
            # The arbiter's word lags the fleet (a holder reports what it held at its last
            # ask): run alone only once no other campaign holds hosts here, in the fleet itself.
            others = Counter(
                h.owner
                for h in snap.hosts
                if h.state in HELD_STATES
                and h.owner != req.owner
                and h.owner not in NOT_MAINTENANCE_OWNERS
            )
            if others:
                out.waiting_for = sorted(others)
                out.waiting = "handing over: " + ", ".join(
                    f"{o} still holds {n} hosts" for o, n in sorted(others.items())
                )
                return out
            # A job that refused a drain keeps its hosts until it may be asked again: they wait
            # for a later wave (``DrainTracker.release``), the rest goes now.
            later = refusing_hosts(b, [h for w in plan.waves for h in w.hosts])
            wave = next(
                (hs for w in plan.waves if (hs := [h for h in w.hosts if h not in later])), []
            )
            if later and not wave:
                out.waiting = f"{len(later)} hosts wait for a job that refused to be drained"
            # Planned work of every owner together stays within the maintenance budget, when the
            # spec names one (a window is an explicit grant of its own).
            maint = None
            if req.spec.window is None and req.spec.budget.maintenance is not None:
                maint = max(1, req.spec.budget.maintenance_limit(snap.hosts_total))
            for name in wave:
                h = b.host(name)
                ours = h.owner == req.owner and h.state in HELD_STATES
                if ours or b.cordon(
                    name, req.owner, req.owner, out.limit, per_rack, per_zone, maintenance=maint
                ):
                    out.hosts.append(name)
                    out.previous[name] = {c: h.versions.get(c, "") for c in req.spec.targets}
            if wave and not out.hosts:
                out.waiting = (
                    f"none of the {len(wave)} hosts of the next wave could be cordoned "
                    f"(budget {out.limit}, {b.out_of_service_count()} out of service)"
                )
            return out

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
                on_host=activity.heartbeat,
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
