"""Activities of campaigns: plan the stages, pick and watch a stage's hosts, steer the trains,
ask Prometheus.

Reading the fleet goes through the backend interface (read-only peeks: the trains and the bulk
operations do all the changing); steering a train goes through ``orchestrator.train.client``
with the worker's own Temporal client, since a workflow cannot send updates to another one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.campaign_failure import CampaignFailureActivities
from activities.fleet_access import as_application_error
from activities.prometheus_query import query_prometheus
from orchestrator.campaign.requests import lower_targets
from orchestrator.contracts.campaign_spec import campaign_workflow_id
from orchestrator.contracts.campaign_types import (
    BakeClockRequest,
    CampaignReport,
    PlanRequest,
    Progress,
    ProgressRequest,
    PromAnswer,
    PromQuery,
    StageHosts,
    StageHostsRequest,
    StagePlanModel,
    TrainAnswer,
    TrainHandoff,
)
from orchestrator.contracts.constants import HELD_STATES, REPAIR_STATES
from orchestrator.contracts.errors import TRAIN_BUSY, BadSpec
from orchestrator.contracts.models import CapacityBudget, DrainPolicy, HostState
from orchestrator.contracts.train_spec import Rollout, TrainSpec, riding
from orchestrator.contracts.train_types import TrainChange, TrainStatus
from orchestrator.execution.target_checks import target_refusal
from orchestrator.planning.campaign_plan import plan_campaign, spread_over_racks, stage_model
from orchestrator.telemetry import metrics
from orchestrator.train.client import (
    TrainNotFound,
    TrainRefused,
    control_train,
    reconfigure_train,
    start_train,
    train_result,
    train_status,
)

#: A train a campaign starts never halts on its own: the campaign's gate judges the failures
#: (a host failing alone is a bad host, not a reason to stop the cluster).
NO_HALT = 1_000_000
_DOWN = REPAIR_STATES
#: How long (seconds) a stop waits for the train to close, within the activity's timeout.
STOP_WAIT = 20.0


class CampaignActivities(CampaignFailureActivities):
    def __init__(self, fleet_path: Path | str, client: Client, task_queue: str) -> None:
        super().__init__(fleet_path)
        self.client = client
        self.task_queue = task_queue

    @activity.defn(name="campaign_plan")
    def plan(self, req: PlanRequest) -> list[StagePlanModel]:
        """The stages resolved against the fleet's clusters (an unknown one is permanent), and
        the targets checked on every cluster they cover, as ``campaign start`` does: a bad
        version or one over the skew window is a permanent ``BadSpec`` (a campaign started
        through the API is refused too)."""
        fleet = self.fleet
        sizes = {c: fleet.hosts_in(c) for c in fleet.cluster_names()}
        try:
            plans = plan_campaign(req.spec, sizes)
        except ValueError as err:
            raise as_application_error(BadSpec(str(err))) from None
        spec = req.spec  # bad versions (every backend keeps the list) and the skew window
        covered = sorted({c for p in plans for c in p.clusters})
        refused = target_refusal(fleet, covered, spec.targets, spec.skew, spec.supersedes)
        if refused is not None:
            raise as_application_error(BadSpec(refused[1], field=refused[0]))
        first = next((c for p in plans for c in p.clusters), None)
        rate = (
            self.peek(first, datetime.now(UTC)).change_failure_rate(req.spec.targets)
            if first is not None
            else 0.0
        )
        return [stage_model(p).model_copy(update={"base_rate": rate}) for p in plans]

    @activity.defn(name="campaign_stage_hosts")
    def stage_hosts(self, req: StageHostsRequest) -> StageHosts:
        """A stage's hosts in one cluster, and those down already (their defect is not the
        change's). A partial stage (a canary) takes in-service hosts still lacking the targets,
        idle ones first, then by name, one rack at a time (``spread_over_racks``): the same
        fleet gives the same canary."""
        b = self.peek(req.cluster, req.wall)
        names = b.host_names()
        down = [n for n in names if b.host(n).state in _DOWN]
        if req.count is None:
            return StageHosts(hosts=None, baseline_out=down, in_scope=len(names) - len(down))
        candidates = []
        for n in names:
            h = b.host(n)
            if h.state != HostState.IN_SERVICE:
                continue
            lacking = any(h.versions.get(c) != v for c, v in req.targets.items())
            candidates.append((not lacking, h.job_id is not None, n, h.rack))
        ranked = [(n, rack) for _, _, n, rack in sorted(candidates)]
        chosen = spread_over_racks(ranked, req.count)
        return StageHosts(hosts=chosen, baseline_out=[], in_scope=len(chosen))

    @activity.defn(name="campaign_stage_progress")
    async def stage_progress(self, req: ProgressRequest) -> Progress:
        """Where a stage stands in one cluster: changed, still to change, held, failed.

        Hosts the cluster's train saw fail on the campaign's rollout count as failed however
        repair left them since (reimaged back, in service): the train never gives them the
        change again, so they are the stage's evidence, not hosts still to change.
        """
        failed_before = await self._rollout_failures(req)
        out = await asyncio.to_thread(self._stage_progress, req, failed_before)
        if req.owners:
            cost = await asyncio.to_thread(self.owner_costs, req.owners, req.cluster)
            out = out.model_copy(update={"cost": cost})
        return out

    async def _rollout_failures(self, req: ProgressRequest) -> frozenset[str]:
        """Hosts that failed on this campaign's rollout, as the cluster's train remembers."""
        if not req.campaign or not lower_targets(req.targets):
            return frozenset()
        try:
            status = await train_status(self.client, req.cluster)
        except (TrainNotFound, TrainRefused):
            return frozenset()
        ours = campaign_workflow_id(req.campaign)
        return frozenset(
            h
            for r in riding(status.rollout, status.rollouts)
            if r.campaign == ours and r.targets == lower_targets(req.targets)
            for h in r.failed
        )

    def _stage_progress(self, req: ProgressRequest, failed_before: frozenset[str]) -> Progress:
        b = self.peek(req.cluster, req.wall)
        scope = req.hosts if req.hosts is not None else b.host_names()
        skip = set(req.baseline_out)
        out = Progress(fleet_hours=b.now)
        bad = self._bad()
        # A version another rollout got marked bad explains its hosts' failures: not ours.
        theirs = {(c, v) for c, v, _ in bad} - set(req.targets.items())
        # One of ours marked bad (by blame elsewhere, or by hand): the stage cannot pass.
        out.marked_bad = {c: v for c, v, _ in bad if req.targets.get(c) == v}
        for n in scope:
            if n in skip:
                continue
            h = b.host(n)
            out.in_scope += 1
            on_target = all(h.versions.get(c) == v for c, v in req.targets.items())
            # A host in repair that never got the change failed of something else.
            failed = h.state == HostState.QUARANTINED or (h.state in _DOWN and on_target)
            if n in failed_before and not failed:
                out.failed[n] = f"failed on {_pairs(req.targets)}, now {h.state}"
                out.attempted += 1
                continue
            if failed and theirs and theirs & set(h.versions.items()):
                failed = False
                out.excused += 1
            elif failed:
                out.failed[n] = f"{h.state}: {h.reason}".strip()
            elif h.state in HELD_STATES:
                out.in_flight += 1
            elif h.state == HostState.IN_SERVICE and not on_target:
                out.pending += 1
            out.changed += on_target
            out.attempted += on_target or failed
        if req.campaign:
            metrics.campaign_stage(req.campaign, req.stage, req.cluster, out.changed, out.failed)
        return out

    @activity.defn(name="campaign_train")
    async def train(self, req: TrainHandoff) -> TrainAnswer:
        """Hand a stage to a cluster's train, or end, stop, pause or resume what we handed."""
        try:
            return await self._train(req)
        except TrainRefused as err:  # stopping, or a change it cannot take yet: ask again
            raise ApplicationError(str(err), type=TRAIN_BUSY) from None

    async def _train(self, req: TrainHandoff) -> TrainAnswer:
        c = req.cluster
        if req.action == "ride":
            rollout = Rollout(
                campaign=req.campaign, stage=req.stage, targets=req.targets, hosts=req.hosts
            )
            try:
                rollout.superseded = await self._retarget(req)
                moved = {comp: req.targets[comp] for comp in rollout.superseded}
                change = TrainChange(rollout=rollout, targets=moved or None)
                status = await reconfigure_train(self.client, c, change)
            except TrainNotFound:
                return await self._start(req, rollout)
            if status.state == "halted":
                status = await control_train(self.client, c, "resume", f"{req.campaign}: resumed")
            return TrainAnswer(state=status.state)
        try:
            if req.action in ("end", "keep"):
                change = TrainChange(clear_rollout=True, rollout_campaign=req.campaign)
                if req.action == "keep" and req.targets:
                    change.targets = dict(req.targets)
                elif req.action == "end" and req.supersedes:
                    change.targets = await self._restore(req)
                status = await reconfigure_train(self.client, c, change)
                if req.action == "end" and status.rollout_only and not status.rollouts:
                    status = await self._stop(c, req.reason)  # the last campaign to leave it
            elif req.action == "stop":
                status = await train_status(self.client, c)
                if any(r.campaign != req.campaign for r in status.rollouts):
                    # Another campaign rides the train we started: leave it to that one.
                    change = TrainChange(clear_rollout=True, rollout_campaign=req.campaign)
                    status = await reconfigure_train(self.client, c, change)
                else:
                    status = await self._stop(c, req.reason)
            elif req.action in ("pause", "resume"):
                status = await train_status(self.client, c)
                allowed = ("running", "halted") if req.action == "pause" else ("paused", "halted")
                if status.state in allowed:
                    status = await control_train(self.client, c, req.action, req.reason)  # type: ignore[arg-type]
            else:
                raise ApplicationError(f"action: {req.action!r}", non_retryable=True)
        except TrainNotFound as err:  # the train has ended: it holds nothing of ours any more
            return TrainAnswer(state="gone", reason=str(err))
        return TrainAnswer(state=status.state)

    async def _retarget(self, req: TrainHandoff) -> dict[str, str]:
        """component -> the train's own target a superseding ride replaces (by the campaign's).

        A train still rolling the version this campaign supersedes would go on installing it
        on the hosts it has not visited yet; they get the campaign's version instead. Only
        once the ride covers the whole cluster (``hosts`` None): re-targeted during a canary,
        the train would give the new version to hosts outside it before the canary passed.
        A retried ride finds the train moved already and keeps what its first try replaced.
        """
        if not req.supersedes or req.hosts is not None:
            return {}
        status = await train_status(self.client, req.cluster)
        before = {
            comp: old
            for r in riding(status.rollout, status.rollouts)
            if r.campaign == req.campaign
            for comp, old in r.superseded.items()
        }
        out: dict[str, str] = {}
        for comp, old in req.supersedes.items():
            own = status.targets.get(comp)
            moved = before.get(comp) == old and own == req.targets.get(comp)
            if comp in req.targets and (own == old or moved):
                out[comp] = old
        return out

    async def _restore(self, req: TrainHandoff) -> dict[str, str] | None:
        """The superseded targets to put back when the campaign ends without keeping its own
        on this cluster (failed, aborted, rolled back mid-way), or None: the train goes on with
        the rollout it was given before, not with a version the campaign did not finish."""
        status = await train_status(self.client, req.cluster)
        ours = [r for r in riding(status.rollout, status.rollouts) if r.campaign == req.campaign]
        back = {
            comp: old
            for r in ours
            for comp, old in r.superseded.items()
            if status.targets.get(comp) == r.targets.get(comp)
        }
        return back or None

    async def _stop(self, cluster: str, reason: str) -> TrainStatus:
        """Stop a campaign's train; the campaign goes on once it has handed its hosts back."""
        status = await control_train(self.client, cluster, "stop", reason)
        with contextlib.suppress(TimeoutError):
            status = await asyncio.wait_for(train_result(self.client, cluster), STOP_WAIT)
        return status

    async def _start(self, req: TrainHandoff, rollout: Rollout) -> TrainAnswer:
        spec = TrainSpec(
            cluster=req.cluster,
            domain_size=req.domain_size,
            budget=CapacityBudget.model_validate(req.budget or {}),
            targets={},
            halt_after_failures=NO_HALT,
            halt_failure_rate=1.0,
            campaign=req.campaign,
            rollout=rollout,
            rollout_only=True,
            schedule=req.schedule,
        )
        if req.drain is not None:  # the campaign's train.drain; else the train's default
            spec.drain = DrainPolicy.model_validate(req.drain)
        await start_train(self.client, spec, task_queue=self.task_queue)
        return TrainAnswer(started=True, state="running")

    @activity.defn(name="campaign_prometheus")
    async def prometheus(self, req: PromQuery) -> PromAnswer:
        """Run an instant PromQL query; an answer we cannot read holds the stage (says why)."""
        answer = await asyncio.to_thread(query_prometheus, req)
        wid = activity.info().workflow_id or ""  # campaign-<name>
        metrics.campaign_gate(wid.removeprefix("campaign-"), "prometheus", answer.firing != 0)
        return answer

    @activity.defn(name="campaign_bake_clock")
    def bake_clock(self, req: BakeClockRequest) -> float:
        """The cluster's fleet hour now, which a bake waits to pass ``req.target_hours``."""
        return self.fleet.fleet_time(cluster=req.cluster)

    @activity.defn(name="campaign_report")
    def report(self, req: CampaignReport) -> None:
        """The campaign's state and totals into this worker's ``trainctl_campaign_*`` gauges."""
        metrics.campaign_report(
            req.campaign,
            req.state,
            req.stage,
            req.failure_limit,
            {
                "changed": req.hosts_changed,
                "quarantined": req.hosts_quarantined,
                "rolled_back": req.hosts_rolled_back,
            },
            req.held_on_blame,
        )
        metrics.approvals_report(campaign_workflow_id(req.campaign), req.approvals_waiting)

    def all(self) -> list[Callable[..., object]]:
        return [
            self.plan,
            self.stage_hosts,
            self.blame,
            self.rollback_plan,
            self.reclaim,
            self.stage_progress,
            self.train,
            self.prometheus,
            self.bake_clock,
            self.report,
        ]


def _pairs(targets: dict[str, str]) -> str:
    return ", ".join(f"{c}={v}" for c, v in sorted(targets.items()))
