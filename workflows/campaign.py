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

A stage begins when the one before has passed (by completion, not by clock). When a stage fails,
blame names the change behind it; if that is one of ours, it is marked bad fleet-wide and the
campaign either holds every host as it is until an operator resumes or aborts
(``on_failure: hold``), or withdraws and rolls the hosts that got it back to their previous
versions (``rollback``, the default; ends ``rolled_back``). What to hand on, count and say is
decided by the pure code of ``orchestrator.campaign`` (``requests``, ``progress``, ``gate``,
``rollback``); this module sends it: which activity, which child, when.

The whole state is one model, so the campaign continues as new between looks when its history
grows, except while a bulk-operation child runs (its result must come back to the run that
started it).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.campaign_activities import CampaignActivities
    from activities.ops_activities import OpsActivities
    from orchestrator.campaign import gate as gating
    from orchestrator.campaign import progress, rollback, ui
    from orchestrator.campaign.controls import require_state
    from orchestrator.campaign.requests import (
        approve_command,
        lower_targets,
        progress_request,
        stage_operation_spec,
        train_handoff,
        upper_targets,
    )
    from orchestrator.contracts.approvals import (
        ApprovalGate,
        ApproveRequest,
        GateName,
        waiting_text,
    )
    from orchestrator.contracts.campaign_types import (
        FINAL_STATES,
        BakeClockRequest,
        BlameRequest,
        BlameResult,
        CampaignControl,
        CampaignInput,
        CampaignReport,
        CampaignState,
        CampaignStatus,
        ClusterRollback,
        ClusterStage,
        PlanRequest,
        Progress,
        PromAnswer,
        ReclaimResult,
        RollbackPlan,
        RollbackPlanRequest,
        StageHosts,
        StageHostsRequest,
        StagePlanModel,
        StageStatus,
        TrainAnswer,
    )
    from orchestrator.contracts.errors import CAMPAIGN_FAILED
    from orchestrator.contracts.messages import VerifyOutcome
    from orchestrator.contracts.ops_spec import OperationSpec, operation_id
    from orchestrator.contracts.ops_types import OPERATION_ABORTED, OperationInput, OperationStatus
    from workflows.fleet_timing import (
        APPROVAL_GATES,
        PROM_OPTIONS,
        TRAIN_OPTIONS,
        ApprovalGates,
        fleet_call,
        history_full,
    )


@workflow.defn(name="Campaign")
class Campaign:
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
        elif waiting := [g for g in self.st.status.approvals if g.state == "waiting"]:
            self._set_state("waiting_for_approval", waiting_text(waiting[-1]))
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

    @workflow.update(name="approve")
    def approve(self, req: ApproveRequest) -> ApprovalGate:
        """Open a waiting approval gate (``trainctl campaign approve``, or automation)."""
        assert self.st is not None
        return ApprovalGates(self.st.status.approvals).approve(req)

    @approve.validator
    def _can_approve(self, req: ApproveRequest) -> None:
        assert self.st is not None
        ApprovalGates(self.st.status.approvals).validate(req)

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
            plan: list[StagePlanModel] = await fleet_call(
                CampaignActivities.plan, PlanRequest(spec=spec)
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
        if await self._approval(ss, "before"):
            return "aborted" if st.abort else "failed"
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
                if await self._approval(ss, "after"):
                    return "aborted" if st.abort else "failed"
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

    async def _approval(self, ss: StageStatus, gate: GateName) -> bool:
        """Wait at the stage's ``gate`` if its spec asks for one: True when the stage must stop
        there (aborted, or the gate timed out: the stage has failed, saying so)."""
        assert self.st is not None and self.inp is not None
        spec = progress.stage_approval(self.inp.spec, ss.name, gate)
        gates = ApprovalGates(self.st.status.approvals)
        if spec is None or gates.approved(ss.name, gate) or not workflow.patched(APPROVAL_GATES):
            return False
        waiting = gates.gate_for(
            spec, ss.name, gate, approve_command(workflow.info().workflow_id, ss.name, gate)
        )
        ss.state, ss.gate = "waiting_for_approval", waiting_text(waiting)
        self._set_state("waiting_for_approval", ss.gate)
        await self._report()
        why = await gates.wait(waiting, lambda: bool(self.st and self.st.abort))
        if why == "stopped":  # aborted while it waited: the campaign ends here
            return True
        ss.gate = why or f"approved by {waiting.approver}"
        if why:  # timed out
            ss.state, ss.reason = "failed", why
            self._show()
            return True
        ss.state = "running"
        self._set_state("paused" if self.st.paused else "running", ss.gate)
        return False

    async def _nap(self, seconds: float) -> None:
        """Wait ``seconds`` of wall time, or less if a control or a child's end wakes us."""
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self.wake, timeout=timedelta(seconds=seconds))

    def _history_full(self) -> bool:
        assert self.inp is not None
        # Not while a bulk operation runs: its result must come back to the run that started it.
        return not self.ops and history_full(self.inp.max_history_events)

    async def _start_clusters(self, plan: StagePlanModel, ss: StageStatus) -> None:
        """Start the stage's next clusters: a rollout on their trains, else the operation."""
        assert self.st is not None and self.inp is not None
        for cs in progress.clusters_to_start(plan, ss):
            limit = plan.hosts_per_cluster[cs.cluster] if plan.partial else None
            chosen: StageHosts = await fleet_call(
                CampaignActivities.stage_hosts,
                StageHostsRequest(
                    cluster=cs.cluster,
                    count=limit,
                    targets=self.inp.spec.targets,
                    wall=workflow.now(),
                ),
            )
            progress.note_hosts(cs, chosen)
            if not self._lower():
                self._start_operation(ss, cs)
                continue
            answer = await self._steer(
                cs.cluster, "ride", stage=ss.name, targets=self._lower(), hosts=cs.hosts
            )
            if answer.started and cs.cluster not in self.st.trains_started:
                self.st.trains_started.append(cs.cluster)
            cs.started_train = answer.started
            cs.state = "rolling"

    def _lower(self) -> dict[str, str]:
        assert self.inp is not None
        return lower_targets(self.inp.spec.targets)

    async def _steer(self, cluster: str, action: str, **kw: object) -> TrainAnswer:
        """Hand ``cluster``'s train a message (ride, keep, end, stop, pause, resume)."""
        assert self.inp is not None
        handoff = train_handoff(self.inp.spec, cluster, action, **kw)
        answer: TrainAnswer = await workflow.execute_activity_method(
            CampaignActivities.train, handoff, **TRAIN_OPTIONS
        )
        return answer

    def _start_operation(self, ss: StageStatus, cs: ClusterStage) -> None:
        """Driver/CUDA targets: one bulk operation over the stage's hosts of this cluster."""
        assert self.inp is not None and self.st is not None
        plan = self.st.plan[self.st.stage_index]
        op_spec = stage_operation_spec(self.inp.spec, plan, ss.name, cs)
        cs.operation_id = operation_id(op_spec)
        cs.state = "upgrading"
        self.ops[cs.cluster] = asyncio.create_task(self._operation(op_spec))

    async def _operation(self, op_spec: OperationSpec) -> OperationStatus | str:
        """Run a bulk operation as a child: its final status, or why it failed."""
        assert self.inp is not None
        try:
            return await workflow.execute_child_workflow(
                "BulkOperation",
                OperationInput(spec=op_spec),
                id=operation_id(op_spec),
                task_queue=workflow.info().task_queue,
                result_type=OperationStatus,
                # An aborted or failed campaign lets the operation hand its hosts back itself.
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"campaign {self.inp.spec.name}: {dict(op_spec.targets)} on "
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
            look = progress_request(self.inp.spec, self.st.status, ss, cs, targets, workflow.now())
            prog: Progress = await fleet_call(CampaignActivities.stage_progress, look)
            progress.apply_progress(cs, prog)
            if cs.state == "rolling" and prog.complete:
                if upper_targets(self.inp.spec.targets):
                    self._start_operation(ss, cs)
                else:
                    cs.state, cs.done_hours = "baking", prog.fleet_hours
            elif cs.state == "upgrading" and self.ops[cs.cluster].done():
                result = self.ops.pop(cs.cluster).result()
                progress.operation_ended(self.st.status, cs, result, prog.fleet_hours)
            if cs.state == "baking":
                await self._bake(plan, cs, prog.fleet_hours)
        gating.roll_up(plan, ss)

    async def _bake(self, plan: StagePlanModel, cs: ClusterStage, fleet_hours: float) -> None:
        """A changed cluster waits ``bake`` fleet hours, then is done."""
        assert cs.done_hours is not None
        end = cs.done_hours + plan.bake_hours
        if fleet_hours < end and not self._lower():  # no train moves this clock
            await fleet_call(
                CampaignActivities.bake_clock,
                BakeClockRequest(cluster=cs.cluster, target_hours=end),
            )
        if fleet_hours >= end:
            cs.state = "done"
            if not plan.partial and self._lower():
                # A whole cluster done: its train keeps the targets as its own (and records them).
                await self._steer(cs.cluster, "keep", targets=self._lower())

    async def _blame(self, ss: StageStatus) -> None:
        """Name the change behind a failed stage (``status.blame``); its top suspect, if it is
        ours, is marked bad fleet-wide."""
        assert self.st is not None and self.inp is not None
        found: BlameResult = await fleet_call(
            CampaignActivities.blame,
            BlameRequest(
                campaign=self.inp.spec.name,
                stage=ss.name,
                targets=dict(self.inp.spec.targets),
                clusters=list(ss.clusters.values()),
                wall=workflow.now(),
            ),
        )
        progress.note_blame(self.st, ss, found)

    async def _apply_pause(self, ss: StageStatus) -> None:
        """Pause the trains rolling this stage while the campaign is paused; resume them after."""
        assert self.st is not None
        st = self.st
        if not self._lower():
            return
        if st.paused:
            for cluster, cs in ss.clusters.items():
                if cs.state == "rolling" and cluster not in st.trains_paused:
                    await self._steer(cluster, "pause", reason=f"campaign {ss.name} paused")
                    st.trains_paused.append(cluster)
        elif st.trains_paused:
            for cluster in list(st.trains_paused):
                await self._steer(cluster, "resume", reason="campaign resumed")
                st.trains_paused.remove(cluster)

    async def _prometheus_clear(self, plan: StagePlanModel, ss: StageStatus) -> bool:
        """The stage's Prometheus gate: True when its query answers nothing (or there is none)."""
        prom = plan.gates.prometheus
        if prom is None:
            return True
        try:
            answer: PromAnswer = await workflow.execute_activity_method(
                CampaignActivities.prometheus, gating.prom_query(prom), **PROM_OPTIONS
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            cause = err.cause if isinstance(err.cause, FailureError) else err
            answer = gating.failed_look(cause.message)
        if gating.note_prometheus(ss, answer):
            return True
        assert self.st is not None
        if self.st.status.state == "running":
            self._set_state("held", f"stage {ss.name} held by Prometheus: {prom.query}")
        self.wake = False
        await self._nap(prom.every_seconds)
        return False

    async def _report(self) -> None:
        """Tell the metrics what changed since the last report (nothing when nothing did)."""
        assert self.st is not None
        status = self.st.status
        gating.roll_up_campaign(status)
        report = progress.campaign_report(status)
        if report != self.reported:
            await fleet_call(CampaignActivities.report, report)
            self.reported = report

    # ------------------------------------------------------------------- finish
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
            await self._steer(cluster, action, reason=f"campaign {self.inp.spec.name} {outcome}")
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

    # ------------------------------------------------------------ after failure
    async def _after_failure(self, ss: StageStatus) -> str:
        """failed (blame named nothing of ours) | resume | aborted | rolled_back."""
        assert self.st is not None and self.inp is not None
        if not self.st.blamed:
            return "failed"
        if self.inp.spec.on_failure == "hold":
            return await self._hold_on_blame(ss)
        return await self._roll_back(ss)

    async def _hold_on_blame(self, ss: StageStatus) -> str:
        """Wait, hosts as they are, for ``resume`` (failures forgiven) or ``abort``."""
        assert self.st is not None
        st = self.st
        st.status.held_on_blame = True
        self._set_state("held", rollback.hold_reason(ss, st.blamed))
        await self._report()
        await workflow.wait_condition(lambda: bool(st.abort) or not st.status.held_on_blame)
        if st.abort:
            return "aborted"
        rollback.forgive_stage(st, ss)
        return "resume"

    async def _roll_back(self, ss: StageStatus) -> str:
        """Withdraw, then put every host that got the blamed version back on its previous one."""
        assert self.st is not None and self.inp is not None
        st, blamed = self.st, dict(self.st.blamed)
        pairs = rollback.blamed_pairs(blamed)
        self._set_state(
            "rolling_back",
            f"stage {ss.name} failed and blame names {pairs}: rolling back the hosts that got it",
        )
        await self._report()
        await self._withdraw("rolling back")
        touched = progress.touched_clusters(st.status)
        notes: dict[str, str] = {}  # cluster -> what could not be rolled back
        # Hosts still held by a train when we look (its domain in flight) may come back
        # quarantined after the operation took its scope: look again, up to ROLLBACK_ROUNDS,
        # until nothing is left to do.
        for round_no in range(rollback.ROLLBACK_ROUNDS):
            plan: RollbackPlan = await fleet_call(
                CampaignActivities.rollback_plan,
                RollbackPlanRequest(
                    campaign=self.inp.spec.workflow_id,
                    clusters=touched,
                    blamed=dict(st.blamed),
                    wall=workflow.now(),
                ),
            )
            work = rollback.round_work(plan, round_no)
            if not work and round_no > 0:
                break
            said = await asyncio.gather(*(self._roll_back_cluster(cr, round_no) for cr in work))
            notes.update({cr.cluster: note for cr, note in zip(work, said, strict=True)})
        st.status.reason = rollback.rolled_back_reason(
            ss, blamed, st.status.hosts_rolled_back, notes
        )
        return "rolled_back"

    async def _roll_back_cluster(self, cr: ClusterRollback, round_no: int = 0) -> str:
        """Roll one cluster back: the reclaimed hosts, then operations for hosts in service.
        What could not be rolled back, in words ('' when everything was)."""
        assert self.st is not None and self.inp is not None
        left: list[str] = []
        if cr.reclaim:  # first: back in service, they make room for the drains
            left += await self._reclaim(cr)
        for i, group in enumerate(cr.groups):
            spec = rollback.rollback_operation_spec(self.inp.spec, cr.cluster, i, group, round_no)
            result = await self._operation(spec)
            left.append(rollback.note_rollback_operation(self.st.status, cr.cluster, result))
        left.append(rollback.unknown_note(cr))
        return "; ".join(n for n in left if n)

    async def _reclaim(self, cr: ClusterRollback) -> list[str]:
        """Hosts the bad build took out: reclaim, reinstall, wait the install out, verify."""
        assert self.st is not None and self.inp is not None
        owner = self.inp.spec.workflow_id
        res: ReclaimResult = await fleet_call(
            CampaignActivities.reclaim,
            rollback.reclaim_request(cr, owner, self.st.blamed, workflow.now()),
            heartbeat=True,
        )
        if res.updated:
            await self._wait_fleet(cr.cluster, res.fleet_hours + res.duration_hours)
        back: VerifyOutcome = await fleet_call(
            OpsActivities.verify,
            rollback.reclaim_verify_request(cr, owner, res, workflow.now()),
        )
        return rollback.note_reclaim(self.st.status, cr, res, back)

    async def _wait_fleet(self, cluster: str, end_hours: float) -> None:
        """Until the cluster's fleet clock reaches ``end_hours``."""
        assert self.inp is not None
        while True:
            now: float = await fleet_call(
                CampaignActivities.bake_clock,
                BakeClockRequest(cluster=cluster, target_hours=end_hours),
            )
            if now >= end_hours - 1e-9:
                return
            self.wake = False
            await self._nap(self.inp.poll_seconds)
