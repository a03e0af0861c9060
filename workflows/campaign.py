"""A campaign: one change rolled over clusters in ordered stages (id ``campaign-<name>``).

Each stage covers some clusters (``parallel`` at a time), maybe only some hosts of each (a
canary). In each cluster the stage's lower-layer targets ride the cluster's train: the campaign
hands them over as a *rollout* limited to the stage's hosts (starting a train where none runs),
so the train stays the one actor draining that cluster and the arbiter's budget holds for all.
Driver/CUDA targets then run as a ``BulkOperation`` child over the same hosts (a child, so its
progress shows under the campaign in the UI, and an abort cancels it). The campaign only watches
(a read-only look per cluster every ``poll_seconds``) and judges:

- failures among the stage's changed hosts against the gate (an explicit ``max_failures``, or
  the base-rate rule of ``planning.failure_gate``): past it the stage fails and the campaign
  stops, its rollouts withdrawn, at once, even mid-stage;
- bake: once a cluster's hosts are all changed, the stage waits ``bake`` hours of that
  cluster's fleet clock, still counting hosts that go bad;
- then the optional Prometheus query: a non-empty answer holds the stage (state ``held``) until
  it empties.

A stage begins when the one before has passed (by completion, not by clock). The whole state is
one model, so the campaign continues as new between looks when its history grows, except while
a bulk-operation child runs (its result must come back to the run that started it).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.campaign_activities import CampaignActivities
    from orchestrator.campaign import gate as gating
    from orchestrator.campaign import progress, ui
    from orchestrator.campaign.controls import require_state
    from orchestrator.campaign.requests import (
        lower_targets,
        stage_operation_spec,
        train_handoff,
        upper_targets,
    )
    from orchestrator.contracts.campaign_types import (
        FINAL_STATES,
        BakeClockRequest,
        CampaignControl,
        CampaignInput,
        CampaignReport,
        CampaignState,
        CampaignStatus,
        ClusterStage,
        PlanRequest,
        Progress,
        ProgressRequest,
        StageHosts,
        StageHostsRequest,
        StagePlanModel,
        StageStatus,
        TrainAnswer,
        TrainHandoff,
    )
    from orchestrator.contracts.errors import CAMPAIGN_FAILED
    from orchestrator.contracts.ops_spec import OperationSpec, operation_id
    from orchestrator.contracts.ops_types import OPERATION_ABORTED, OperationInput, OperationStatus
    from workflows.campaign_rollback import RollbackSteps
    from workflows.campaign_steps import TRAIN_OPTIONS, CampaignSteps
    from workflows.fleet_timing import fleet_options
    from workflows.history import history_full


@workflow.defn(name="Campaign")
class Campaign(CampaignSteps, RollbackSteps):
    def __init__(self) -> None:
        self.inp: CampaignInput | None = None
        self.st: CampaignState | None = None
        self.ops: dict[str, asyncio.Task[OperationStatus | str]] = {}
        self.wake = False
        self.reported: CampaignReport | None = None

    # ------------------------------------------------------------------ queries
    @workflow.query(name="status")
    def status(self) -> CampaignStatus:
        assert self.st is not None
        return self.st.status

    # ------------------------------------------------------------------ control
    @workflow.update(name="pause")
    def pause(self, req: CampaignControl) -> CampaignStatus:
        assert self.st is not None
        self.st.paused = True
        self._set_state("paused", req.reason or "paused by operator")
        return self.status()

    @pause.validator
    def _can_pause(self, req: CampaignControl) -> None:
        require_state(self.st, "pause")

    @workflow.update(name="resume")
    def resume(self, req: CampaignControl) -> CampaignStatus:
        assert self.st is not None
        self.st.paused = False
        if self.st.status.held_on_blame:  # the operator takes the blame on: the stage goes on
            self.st.status.held_on_blame = False
            self._set_state("running", req.reason or "resumed by operator after blame")
        else:
            self._set_state("running", req.reason)
        return self.status()

    @resume.validator
    def _can_resume(self, req: CampaignControl) -> None:
        require_state(self.st, "resume")

    @workflow.update(name="abort")
    def abort(self, req: CampaignControl) -> CampaignStatus:
        assert self.st is not None
        self.st.abort = req.reason or "aborted by operator"
        self.wake = True
        return self.status()

    @abort.validator
    def _can_abort(self, req: CampaignControl) -> None:
        require_state(self.st, "abort")

    def _set_state(self, state: str, reason: str = "") -> None:
        assert self.st is not None
        self.st.status.state, self.st.status.reason = state, reason
        self.wake = True
        self._show()

    def _show(self) -> None:
        assert self.st is not None and self.inp is not None
        workflow.set_current_details(ui.campaign_details(self.inp.spec, self.st))

    # ---------------------------------------------------------------------- run
    @workflow.run
    async def run(self, inp: CampaignInput) -> CampaignStatus:
        self.inp = inp
        spec = inp.spec
        if inp.state is None:
            plan: list[StagePlanModel] = await workflow.execute_activity_method(
                CampaignActivities.plan, PlanRequest(spec=spec), **fleet_options()
            )
            inp.state = CampaignState(status=progress.new_status(spec, plan), plan=plan)
        self.st = st = inp.state
        self._show()
        while st.stage_index < len(st.plan):
            outcome = await self._stage(st.stage_index)
            if outcome == "continue":
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(inp.model_copy(update={"state": st}))
            if outcome == "failed":
                outcome = await self._after_failure(st.status.stages[st.stage_index])
                if outcome == "resume":
                    continue
            if outcome != "passed":
                return await self._finish(outcome)
            st.stage_index += 1
        return await self._finish("succeeded")

    # -------------------------------------------------------------------- stage
    async def _stage(self, i: int) -> str:
        """Run stage ``i`` to passed | failed | aborted, or 'continue' (as new) part way."""
        assert self.st is not None and self.inp is not None
        st, plan, ss = self.st, self.st.plan[i], self.st.status.stages[i]
        st.status.stage = ss.name
        progress.open_stage(plan, ss)
        if ss.state == "skipped":
            return "passed"
        while True:
            if st.abort:
                return "aborted"
            if not st.paused:
                await self._start_clusters(plan, ss)
            await self._look(plan, ss)
            verdict = gating.judge_stage(plan, ss)
            if verdict is not None:
                ss.state, ss.reason = "failed", verdict
                await self._blame(ss)
                self._show()
                return "failed"
            if progress.note_broken(ss):  # a cluster's bulk operation failed
                await self._blame(ss)
                return "failed"
            await self._apply_pause(ss)
            if progress.all_done(ss) and await self._prometheus_clear(plan, ss):
                ss.state, ss.bake_remaining_hours = "passed", 0.0
                if st.status.state == "held":
                    self._set_state("running")
                self._show()
                return "passed"
            self._show()
            await self._report()
            if self._history_full():
                return "continue"
            self.wake = False
            await self._nap(self.inp.poll_seconds)

    async def _nap(self, seconds: float) -> None:
        """Wait ``seconds`` of wall time, or less if a control or a child's end wakes us."""
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self.wake, timeout=timedelta(seconds=seconds))

    def _history_full(self) -> bool:
        assert self.inp is not None
        # Not while a bulk operation runs: its result must come back to the run that started it.
        return not self.ops and history_full(self.inp.max_history_events)

    async def _start_clusters(self, plan: StagePlanModel, ss: StageStatus) -> None:
        assert self.st is not None and self.inp is not None
        busy = [c for c in ss.clusters.values() if c.state in ("rolling", "upgrading")]
        for cs in ss.clusters.values():
            if len(busy) >= plan.parallel:
                return
            if cs.state != "pending":
                continue
            limit = plan.hosts_per_cluster[cs.cluster] if plan.partial else None
            chosen: StageHosts = await workflow.execute_activity_method(
                CampaignActivities.stage_hosts,
                StageHostsRequest(
                    cluster=cs.cluster,
                    count=limit,
                    targets=self.inp.spec.targets,
                    wall=workflow.now(),
                ),
                **fleet_options(),
            )
            progress.note_hosts(cs, chosen)
            lower = self._lower()
            if lower:
                answer: TrainAnswer = await workflow.execute_activity_method(
                    CampaignActivities.train,
                    self._handoff(cs.cluster, "ride", stage=ss.name, targets=lower, hosts=cs.hosts),
                    **TRAIN_OPTIONS,
                )
                if answer.started and cs.cluster not in self.st.trains_started:
                    self.st.trains_started.append(cs.cluster)
                cs.started_train = answer.started
                cs.state = "rolling"
            else:
                self._start_operation(ss, cs)
            busy.append(cs)

    def _lower(self) -> dict[str, str]:
        assert self.inp is not None
        return lower_targets(self.inp.spec.targets)

    def _upper(self) -> dict[str, str]:
        assert self.inp is not None
        return upper_targets(self.inp.spec.targets)

    def _handoff(self, cluster: str, action: str, **kw: object) -> TrainHandoff:
        assert self.inp is not None
        return train_handoff(self.inp.spec, cluster, action, **kw)

    def _start_operation(self, ss: StageStatus, cs: ClusterStage) -> None:
        """Driver/CUDA targets: one bulk operation over the stage's hosts of this cluster."""
        assert self.inp is not None and self.st is not None
        plan = self.st.plan[self.st.stage_index]
        op_spec = stage_operation_spec(self.inp.spec, plan, ss.name, cs)
        cs.operation_id = operation_id(op_spec)
        cs.state = "upgrading"
        self.ops[cs.cluster] = asyncio.create_task(self._operation(op_spec))

    async def _operation(self, op_spec: OperationSpec) -> OperationStatus | str:
        try:
            return await workflow.execute_child_workflow(
                "BulkOperation",
                OperationInput(spec=op_spec),
                id=operation_id(op_spec),
                task_queue=workflow.info().task_queue,
                result_type=OperationStatus,
                # An aborted or failed campaign lets the operation hand its hosts back itself.
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"campaign {self.inp.spec.name}: {dict(op_spec.targets)} on "  # type: ignore[union-attr]
                f"{op_spec.scope.cluster}",
            )
        except ChildWorkflowError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == OPERATION_ABORTED:
                details = cause.details
                if details and isinstance(details[0], dict):  # aborted: its final status
                    return OperationStatus.model_validate(details[0])
            return str(getattr(cause, "message", cause) or "the bulk operation failed")
        finally:
            self.wake = True

    async def _look(self, plan: StagePlanModel, ss: StageStatus) -> None:
        """Read every started cluster's progress; move clusters on to bake, then done."""
        assert self.inp is not None and self.st is not None
        for cs in ss.clusters.values():
            if cs.state in ("pending", "done", "failed"):
                continue
            targets = self._lower() if cs.state == "rolling" else self.inp.spec.targets
            prog: Progress = await workflow.execute_activity_method(
                CampaignActivities.stage_progress,
                ProgressRequest(
                    cluster=cs.cluster,
                    campaign=self.inp.spec.name,
                    stage=ss.name,
                    hosts=cs.hosts,
                    baseline_out=cs.baseline_out,
                    targets=targets,
                    wall=workflow.now(),
                ),
                **fleet_options(),
            )
            progress.apply_progress(cs, prog)
            if cs.state == "rolling" and prog.complete:
                if self._upper():
                    self._start_operation(ss, cs)
                else:
                    cs.state, cs.done_hours = "baking", prog.fleet_hours
            elif cs.state == "upgrading" and self.ops[cs.cluster].done():
                result = self.ops.pop(cs.cluster).result()
                progress.operation_ended(self.st.status, cs, result, prog.fleet_hours)
            if cs.state == "baking":
                assert cs.done_hours is not None
                end = cs.done_hours + plan.bake_hours
                if prog.fleet_hours < end and not self._lower():  # no train moves this clock
                    await workflow.execute_activity_method(
                        CampaignActivities.bake_clock,
                        BakeClockRequest(cluster=cs.cluster, target_hours=end),
                        **fleet_options(),
                    )
                if prog.fleet_hours >= end:
                    cs.state = "done"
                    await self._cluster_done(plan, cs)
        gating.roll_up(plan, ss)

    async def _withdraw(self, outcome: str) -> None:
        """Cancel our operations and hand every train back what we gave it (once)."""
        assert self.st is not None and self.inp is not None
        st = self.st
        if st.withdrawn:
            return
        for task in self.ops.values():
            task.cancel()
        for cluster in progress.touched_clusters(st.status):
            if not self._lower():
                break
            action = "stop" if cluster in st.trains_started else "end"
            await workflow.execute_activity_method(
                CampaignActivities.train,
                self._handoff(cluster, action, reason=f"campaign {self.inp.spec.name} {outcome}"),
                **TRAIN_OPTIONS,
            )
        st.withdrawn = True

    async def _finish(self, outcome: str) -> CampaignStatus:
        """Withdraw what is ours from every train and operation; the final status."""
        assert self.st is not None and self.inp is not None
        st = self.st
        await self._withdraw(outcome)
        reason = progress.finish_status(st, outcome)
        self._show()
        await self._report()
        await workflow.wait_condition(workflow.all_handlers_finished)
        if outcome in ("failed", "aborted", "rolled_back"):
            # Not succeeded is not completed: the workflow list shows it Failed, the reason its
            # message, the final status its details (clients read it back as the result).
            raise ApplicationError(reason, st.status, type=CAMPAIGN_FAILED, non_retryable=True)
        assert outcome in FINAL_STATES
        return st.status
