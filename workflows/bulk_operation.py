"""A bulk operation (OpsPlanner) over a scope of clusters: id ``ops-<request_id or hash>``.

It checks the whole plan first (a refusal or a bad scope fails it at once, with the reason),
then runs one ``ClusterOperation`` child per cluster, a few side by side, and aggregates their
progress, which children signal as they move (queries cannot ask children). Pause, resume and
abort are updates, validated against the current state, and passed on to the children, which
obey them between waves. When one cluster fails (a wave rolled back), the others are aborted
after their current wave and clusters not yet started never start: a bad build is stopped on a
few hosts, not rolled over the fleet. A failed or aborted operation fails the workflow (red in
the UI), the reason its message and its final status the error's details.

It continues as new when the server suggests it or its history passes ``max_history_events``
(the progress signals of long-running children are most of it), at a point where no child is
being started and every handler has finished, carrying its status, the clusters not yet
started, those still running, and the failure that stops the others. Running children live on:
they are started with ``ParentClosePolicy.ABANDON`` (a parent close policy also applies when a
parent continues as new), and the next run rejoins them by workflow id: controls go to them as
signals through external handles, and each child's last act, after it has handed everything
back, is a ``cluster_done`` signal with its outcome, which a signal by workflow id delivers to
whichever run is current. A child that ends without that signal (terminated, say) is noticed
by an hourly look at which children still run, and counts as failed. An operation that is
cancelled cancels its running children itself, as ABANDON does not.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from activities.ops_activities import OpsActivities
    from orchestrator.contracts.approvals import ApprovalGate, ApproveRequest, waiting_text
    from orchestrator.contracts.arbiter_types import HoldersRequest
    from orchestrator.contracts.messages import ClockInfo, FleetInfoRequest
    from orchestrator.contracts.ops_spec import operation_id
    from orchestrator.contracts.ops_types import (
        FINAL_STATES,
        OPERATION_ABORTED,
        OPERATION_FAILED,
        CheckRequest,
        ClusterControl,
        ClusterOpInput,
        ClusterProgress,
        ControlAction,
        OpControl,
        OperationCheck,
        OperationInput,
        OperationState,
        OperationStatus,
    )
    from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from orchestrator.ops.ui import cluster_summary, operation_details
    from workflows.cluster_operation import ClusterOperation
    from workflows.fleet_timing import APPROVAL_GATES, ApprovalGates, fleet_call, history_full

#: How often a run that rejoined running children checks that they still run (the fallback
#: for a child that ends without its ``cluster_done`` signal).
CHILD_CHECK = timedelta(hours=1)
#: How often, and how many times, to look whether a child that reported has also completed.
CLOSE_CHECK_INTERVAL = timedelta(seconds=1)
CLOSE_CHECKS = 10

_SUMS = (
    "waves_total",
    "waves_done",
    "hosts_changed",
    "hosts_rolled_back",
    "hosts_quarantined",
    "hosts_deferred",
    "jobs_interrupted",
)


@workflow.defn(name="BulkOperation")
class BulkOperation:
    @workflow.init
    def __init__(self, inp: OperationInput) -> None:
        spec, carried = inp.spec, inp.state
        self.st = (
            carried.status
            if carried
            else OperationStatus(
                # A scheduled run is one operation of many: its own workflow id names it.
                operation_id=workflow.info().workflow_id if inp.scheduled else operation_id(spec),
                kind=spec.kind,
                targets=dict(spec.targets),
                consistency=spec.consistency,
            )
        )
        self.children: dict[str, ChildWorkflowHandle[Any, ClusterProgress]] = {}
        self.failed = carried.failed if carried else ""
        self.changed = False
        # Continue as new when the history is full.
        self.max_history = inp.max_history_events
        #: Clusters whose child runs: its task in this run, or None for a child rejoined by id.
        self.running: dict[str, asyncio.Task[None] | None] = (
            dict.fromkeys(carried.running) if carried else {}
        )
        self.starting: set[str] = set()  # start requested, not yet started: no continue-as-new
        self.reported: dict[str, ClusterProgress] = {}  # ``cluster_done`` not yet taken in
        self.failure_told = carried.failure_told if carried else False
        self.seen_closed: set[str] = set()  # rejoined children once seen ended, unreported

    # ----------------------------------------------------------------- queries
    @workflow.query(name="status")
    def status(self) -> OperationStatus:
        st = self.st.model_copy()
        for name in _SUMS:
            setattr(st, name, sum(getattr(c, name) for c in st.clusters.values()))
        st.waiting_for = sorted({w for c in st.clusters.values() for w in c.waiting_for})
        active = [c for c in st.clusters.values() if c.state not in FINAL_STATES | {"pending"}]
        if st.state == "running" and active and all(c.state == "waiting_for_room" for c in active):
            # Every cluster at work waits for outages to end: say so, and for what (a query
            # only: the recorded state, its search attribute and the controls stay "running").
            st.state = "waiting_for_room"
            st.reason = "; ".join(f"{c.cluster}: {c.reason}" for c in active)
        return st

    def _show(self) -> None:
        """The operation's page in the UI: totals and one row per cluster (not a command)."""
        workflow.set_current_details(operation_details(self.status()))

    @workflow.signal(name="cluster_progress")
    def cluster_progress(self, progress: ClusterProgress) -> None:
        """A child moved on: keep its figures for the status query."""
        if progress.cluster in self.st.clusters:
            self.st.clusters[progress.cluster] = progress
            self._show()

    @workflow.signal(name="cluster_done")
    def cluster_done(self, progress: ClusterProgress) -> None:
        """A child has ended and handed everything back: its outcome, whichever run started it."""
        if progress.cluster in self.st.clusters:
            self.reported[progress.cluster] = progress
            self.changed = True
            self._show()

    # ----------------------------------------------------------------- control
    def _set_state(self, state: str, reason: str) -> None:
        self.st.state, self.st.reason = state, reason
        workflow.upsert_search_attributes([TRAIN_PHASE.value_set(state)])
        self.changed = True
        self._show()

    def _require(self, allowed: tuple[str, ...], action: str) -> None:
        if self.st.state not in allowed:
            raise ValueError(f"cannot {action} an operation that is {self.st.state}")

    @workflow.update(name="pause")
    async def pause(self, req: OpControl) -> OperationStatus:
        """Finish the waves in progress, start no more, and hand the budget back meanwhile."""
        self._set_state("paused", req.reason or "paused by operator")
        await self._tell_children("pause", self.st.reason)
        return self.status()

    @pause.validator
    def _can_pause(self, req: OpControl) -> None:
        self._require(("running",), "pause")

    @workflow.update(name="resume")
    async def resume(self, req: OpControl) -> OperationStatus:
        self._set_state("running", req.reason)
        await self._tell_children("resume", req.reason)
        return self.status()

    @resume.validator
    def _can_resume(self, req: OpControl) -> None:
        self._require(("paused",), "resume")

    @workflow.update(name="abort")
    async def abort(self, req: OpControl) -> OperationStatus:
        """Stop after the waves in progress are safely done; clusters not started never start."""
        self._set_state("aborting", req.reason or "aborted by operator")
        await self._tell_children("abort", self.st.reason)
        return self.status()

    @abort.validator
    def _can_abort(self, req: OpControl) -> None:
        self._require(("running", "paused", "waiting_for_approval"), "abort")

    @workflow.update(name="approve")
    def approve(self, req: ApproveRequest) -> ApprovalGate:
        """Open the approval gate before the start (``trainctl ops approve``, or automation)."""
        return ApprovalGates(self.st.approvals).approve(req)

    @approve.validator
    def _can_approve(self, req: ApproveRequest) -> None:
        ApprovalGates(self.st.approvals).validate(req)

    async def _approval(self, inp: OperationInput) -> str:
        """Wait at the gate before the start if the spec asks for one: '' to go on, else why
        not ('stopped': aborted meanwhile; or the gate timed out)."""
        spec, gates = inp.spec.approval, ApprovalGates(self.st.approvals)
        if spec is None or gates.approved("", "before") or not workflow.patched(APPROVAL_GATES):
            return ""
        command = f"trainctl ops approve --id {self.st.operation_id}"
        waiting = gates.gate_for(spec, "", "before", command)
        self._set_state("waiting_for_approval", waiting_text(waiting))
        why = await gates.wait(waiting, lambda: self.st.state == "aborting")
        if not why:
            self._set_state("running", f"approved by {waiting.approver}")
        return why

    # --------------------------------------------------------------------- run
    @workflow.run
    async def run(self, inp: OperationInput) -> OperationStatus:
        spec, st = inp.spec, self.st
        workflow.upsert_search_attributes(
            [TRAIN_CAMPAIGN.value_set(st.operation_id), TRAIN_PHASE.value_set(st.state)]
        )
        clock: ClockInfo
        if inp.state is not None:  # a continued run: its running children were rejoined
            clock, pending = inp.state.clock, list(inp.state.pending)
        else:
            try:
                check: OperationCheck = await fleet_call(
                    OpsActivities.check,
                    CheckRequest(spec=spec, wall=workflow.now()),
                    summary=f"check the plan over {spec.scope.cluster} before anything moves",
                )
            except ActivityError as err:  # a scope that matches nothing, an unknown cluster
                return await self._finish(f"refused: {getattr(err.cause, 'message', err)}")
            if check.refused:
                return await self._finish(f"refused: {check.refused}")
            if len(check.clusters) == 1:
                workflow.upsert_search_attributes([TRAIN_CLUSTER.value_set(check.clusters[0])])
            clock = await fleet_call(
                FleetActivities.fleet_info,
                FleetInfoRequest(cluster=check.clusters[0]),
                summary=f"read the fleet clock of {check.clusters[0]}",
            )
            st.clusters = {
                c: ClusterProgress(
                    cluster=c,
                    workflow_id=f"{st.operation_id}-{c}",
                    waves_total=check.cluster_waves.get(c, 0),
                )
                for c in check.clusters
            }
            pending = list(check.clusters)
            why = await self._approval(inp)
            if why:
                return await self._finish("" if why == "stopped" else why)
        self._show()
        try:
            await self._run_clusters(inp, clock, pending)
        except (asyncio.CancelledError, CancelledError):
            await self._cancel_children()  # ABANDON does not cancel them: do it here
            raise
        for name in pending:  # never started: aborted, or stopped by another cluster's failure
            st.clusters[name].state = "aborted"
            st.clusters[name].reason = "not started: " + (self.failed or st.reason)
        return await self._finish(self.failed)

    async def _run_clusters(
        self, inp: OperationInput, clock: ClockInfo, pending: list[str]
    ) -> None:
        """Start clusters a few at a time until all have ended (or must not start)."""
        st = self.st
        while True:
            await self._take_reports()
            if self.failed and not self.failure_told:
                self.failure_told = True
                await self._tell_children("abort", f"stopped: {self.failed}")
            while pending and len(self.running) < inp.max_parallel_clusters and self._may_start():
                name = pending.pop(0)
                self.starting.add(name)
                self.running[name] = asyncio.create_task(self._run_cluster(inp, name, clock))
            if not self.running and (not pending or self.failed or st.state == "aborting"):
                return
            if self._may_continue():
                await workflow.wait_condition(workflow.all_handlers_finished)
                # A child that has reported goes with this run, not into the next one.
                if await self._take_reports(every=True) or not self._may_continue():
                    continue
                workflow.continue_as_new(self._next_input(inp, clock, pending))
            self.changed = False
            self._show()
            rejoined = [n for n, task in self.running.items() if task is None]
            try:
                await workflow.wait_condition(
                    lambda: self.changed or self._may_continue(),
                    timeout=CHILD_CHECK if rejoined else None,
                )
            except TimeoutError:
                await self._check_rejoined(rejoined)

    def _may_start(self) -> bool:
        return self.st.state == "running" and not self.failed

    async def _run_cluster(self, inp: OperationInput, name: str, clock: ClockInfo) -> None:
        st = self.st
        progress = st.clusters[name]
        try:
            handle = await workflow.start_child_workflow(
                ClusterOperation.run,
                ClusterOpInput(
                    spec=inp.spec,
                    operation_id=st.operation_id,
                    cluster=name,
                    clock=clock,
                    max_history_events=inp.max_history_events,
                ),
                id=progress.workflow_id,
                task_queue=workflow.info().task_queue,
                # A parent close policy applies on continue-as-new too: children must outlive
                # a run of the operation (a cancelled operation cancels them itself).
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=cluster_summary(st.kind, st.targets, name),
            )
            self.children[name] = handle
            await self._catch_up(name)
            self.starting.discard(name)
            st.clusters[name] = await handle
        except ChildWorkflowError as err:
            cause = err.cause
            details = cause.details if isinstance(cause, ApplicationError) else ()
            if details and isinstance(details[0], dict):
                progress = ClusterProgress.model_validate(details[0])
            else:
                progress = st.clusters[name]
            if isinstance(cause, ApplicationError) and cause.type == OPERATION_ABORTED:
                st.clusters[name] = progress  # aborted, as it said: not a failure
                return
            progress.state = "failed"
            progress.reason = progress.reason or str(getattr(cause, "message", err))
            st.clusters[name] = progress
            if not self.failed:  # the main loop tells the others
                self.failed = f"{name}: {progress.reason}"
        finally:
            self.starting.discard(name)
            self.children.pop(name, None)
            self.running.pop(name, None)
            self.reported.pop(name, None)
            self.changed = True  # the main loop shows it (not here: this also runs on eviction)

    # ---------------------------------------------------------------- children
    async def _tell_children(self, action: ControlAction, reason: str) -> None:
        for name in [n for n in self.running if n not in self.starting]:
            await self._tell(name, action, reason)

    async def _tell(self, name: str, action: ControlAction, reason: str) -> None:
        """Signal one running child by workflow id (it may have been started by an earlier run)."""
        wid = self.st.clusters[name].workflow_id
        try:
            await workflow.get_external_workflow_handle(wid).signal(
                ClusterOperation.control, ClusterControl(action=action, reason=reason)
            )
        except (asyncio.CancelledError, CancelledError):
            raise
        except Exception as err:  # it has just finished: nothing to tell
            workflow.logger.info("control not delivered to %s: %s", wid, err)

    async def _catch_up(self, name: str) -> None:
        """Pass on a control that came while the child was starting."""
        st = self.st
        if st.state not in ("paused", "aborting"):
            if self.failure_told:
                await self._tell(name, "abort", f"stopped: {self.failed}")
            return
        action: ControlAction = "pause" if st.state == "paused" else "abort"
        await self._tell(name, action, st.reason)

    async def _take_reports(self, every: bool = False) -> bool:
        """Settle rejoined clusters whose child said it has ended (``cluster_done``).

        A child started by this run is settled through its handle, once it has completed, unless
        ``every`` (the run is about to continue as new): True if any cluster was settled. A
        child reports just before it completes; it is settled once its workflow has closed too
        (within a few seconds at most), so an operation that has ended has no child running.
        """
        for name in [n for n in self.reported if n not in self.running]:
            del self.reported[name]  # settled through its handle already
        done = [n for n in self.reported if self.running[n] is None or every]
        if not done:
            return False
        open_ids = {self.st.clusters[n].workflow_id for n in done}
        for _ in range(CLOSE_CHECKS):
            closed: list[str] = await fleet_call(
                ArbiterActivities.closed_workflows,
                HoldersRequest(holders=sorted(open_ids)),
                summary="check that the clusters which reported have closed",
            )
            open_ids -= set(closed)
            if not open_ids:
                break
            await workflow.sleep(CLOSE_CHECK_INTERVAL)
        for name in done:
            if name in self.reported and name in self.running:
                self._settle(name, self.reported.pop(name))
        return True

    def _settle(self, name: str, progress: ClusterProgress) -> None:
        if progress.state not in FINAL_STATES:
            progress.state = "failed"
        self.running.pop(name, None)
        self.seen_closed.discard(name)
        self.st.clusters[name] = progress
        if progress.state == "failed" and not self.failed:
            self.failed = f"{name}: {progress.reason}"
        self.changed = True
        self._show()

    async def _check_rejoined(self, rejoined: list[str]) -> None:
        """Fallback for a rejoined child that ended without ``cluster_done``: it failed.

        A child signals before it completes, so one seen ended twice, an hour apart, without
        a signal never sent one.
        """
        ids = {self.st.clusters[n].workflow_id: n for n in rejoined}
        closed: list[str] = await fleet_call(
            ArbiterActivities.closed_workflows,
            HoldersRequest(holders=sorted(ids)),
            summary="check that the rejoined clusters still run",
        )
        for name in (ids[wid] for wid in closed if wid in ids):
            if name not in self.running or name in self.reported:
                continue
            if name not in self.seen_closed:
                self.seen_closed.add(name)
                continue
            progress = self.st.clusters[name].model_copy()
            progress.state = "failed"
            progress.reason = "its workflow ended without reporting an outcome (terminated?)"
            self._settle(name, progress)

    async def _cancel_children(self) -> None:
        for name in list(self.running):
            wid = self.st.clusters[name].workflow_id
            try:
                await workflow.get_external_workflow_handle(wid).cancel()
            except Exception as err:  # it has just finished
                workflow.logger.info("cancel not delivered to %s: %s", wid, err)

    # ----------------------------------------------------------- continue-as-new
    def _may_continue(self) -> bool:
        """The history is full and no child is being started (or every child is known)."""
        if self.starting:
            return False
        return history_full(self.max_history)

    def _next_input(
        self, inp: OperationInput, clock: ClockInfo, pending: list[str]
    ) -> OperationInput:
        state = OperationState(
            status=self.st,
            clock=clock,
            pending=pending,
            running=list(self.running),
            failed=self.failed,
            failure_told=self.failure_told,
        )
        return inp.model_copy(update={"state": state})

    async def _finish(self, failure: str) -> OperationStatus:
        st = self.status()
        if failure:
            self._set_state("failed", failure)
        elif st.state == "aborting" or any(
            c.state == "aborted" for c in st.clusters.values() if c.state in FINAL_STATES
        ):
            self._set_state("aborted", st.reason or "aborted")
        else:
            self._set_state("succeeded", "")
        await workflow.wait_condition(workflow.all_handlers_finished)
        if failure:
            raise ApplicationError(
                failure,
                self.status().model_dump(mode="json"),
                type=OPERATION_FAILED,
                non_retryable=True,
            )
        if self.st.state == "aborted":
            # Aborted is not completed (the workflow list showed a green COMPLETED): Failed,
            # the reason its message, the final status its details, as a failure's are.
            raise ApplicationError(
                self.st.reason or "aborted",
                self.status().model_dump(mode="json"),
                type=OPERATION_ABORTED,
                non_retryable=True,
            )
        return self.status()
