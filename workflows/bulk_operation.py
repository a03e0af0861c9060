"""A bulk operation (OpsPlanner) over a scope of clusters: id ``ops-<request_id or hash>``.

It checks the whole plan first (a refusal or a bad scope fails it at once, with the reason),
then runs one ``ClusterOperation`` child per cluster, a few side by side, and aggregates their
progress, which children signal as they move (queries cannot ask children). Pause, resume and
abort are updates, validated against the current state, and passed on to the children, which
obey them between waves. When one cluster fails (a wave rolled back), the others are aborted
after their current wave and clusters not yet started never start: a bad build is stopped on a
few hosts, not rolled over the fleet. A failed operation fails the workflow (red in the UI) with
its final status as the error's details; an aborted one completes with state ``aborted``.
"""

from __future__ import annotations

import asyncio
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
    from activities.fleet_activities import FleetActivities
    from activities.ops_activities import OpsActivities
    from orchestrator.execution.messages import ClockInfo, FleetInfoRequest
    from orchestrator.ops.spec import operation_id
    from orchestrator.ops.types import (
        FINAL_STATES,
        CheckRequest,
        ClusterControl,
        ClusterOpInput,
        ClusterProgress,
        ControlAction,
        OpControl,
        OperationCheck,
        OperationInput,
        OperationStatus,
    )
    from orchestrator.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from workflows.cluster_operation import ClusterOperation
    from workflows.fleet_clock import fleet_options

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
        spec = inp.spec
        self.st = OperationStatus(
            operation_id=operation_id(spec),
            kind=spec.kind,
            targets=dict(spec.targets),
            consistency=spec.consistency,
        )
        self.children: dict[str, ChildWorkflowHandle[Any, ClusterProgress]] = {}
        self.failed = ""
        self.changed = False

    # ----------------------------------------------------------------- queries
    @workflow.query(name="status")
    def status(self) -> OperationStatus:
        st = self.st.model_copy()
        for name in _SUMS:
            setattr(st, name, sum(getattr(c, name) for c in st.clusters.values()))
        st.waiting_for = sorted({w for c in st.clusters.values() for w in c.waiting_for})
        return st

    @workflow.signal(name="cluster_progress")
    def cluster_progress(self, progress: ClusterProgress) -> None:
        """A child moved on: keep its figures for the status query."""
        if progress.cluster in self.st.clusters:
            self.st.clusters[progress.cluster] = progress

    # ----------------------------------------------------------------- control
    def _set_state(self, state: str, reason: str) -> None:
        self.st.state, self.st.reason = state, reason
        workflow.upsert_search_attributes([TRAIN_PHASE.value_set(state)])
        self.changed = True

    async def _tell_children(self, action: ControlAction, reason: str) -> None:
        for handle in list(self.children.values()):
            try:
                await handle.signal(
                    ClusterOperation.control, ClusterControl(action=action, reason=reason)
                )
            except (asyncio.CancelledError, CancelledError):
                raise
            except Exception as err:  # it has just finished: nothing to tell
                workflow.logger.info("control not delivered to %s: %s", handle.id, err)

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
        self._require(("running", "paused"), "abort")

    # --------------------------------------------------------------------- run
    @workflow.run
    async def run(self, inp: OperationInput) -> OperationStatus:
        spec, st = inp.spec, self.st
        workflow.upsert_search_attributes(
            [TRAIN_CAMPAIGN.value_set(st.operation_id), TRAIN_PHASE.value_set(st.state)]
        )
        try:
            check: OperationCheck = await workflow.execute_activity_method(
                OpsActivities.check, CheckRequest(spec=spec, wall=workflow.now()), **fleet_options()
            )
        except ActivityError as err:  # a scope that matches nothing, an unknown cluster
            return await self._finish(f"refused: {getattr(err.cause, 'message', err)}")
        if check.refused:
            return await self._finish(f"refused: {check.refused}")
        if len(check.clusters) == 1:
            workflow.upsert_search_attributes([TRAIN_CLUSTER.value_set(check.clusters[0])])
        clock: ClockInfo = await workflow.execute_activity_method(
            FleetActivities.fleet_info,
            FleetInfoRequest(cluster=check.clusters[0]),
            **fleet_options(),
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
        running: dict[str, asyncio.Task[None]] = {}
        while True:
            while pending and len(running) < inp.max_parallel_clusters and self._may_start():
                name = pending.pop(0)
                running[name] = asyncio.create_task(self._run_cluster(inp, name, clock, running))
            if not running and (not pending or self.failed or st.state == "aborting"):
                break
            self.changed = False
            await workflow.wait_condition(lambda: self.changed)
        for name in pending:  # never started: aborted, or stopped by another cluster's failure
            st.clusters[name].state = "aborted"
            st.clusters[name].reason = "not started: " + (self.failed or st.reason)
        return await self._finish(self.failed)

    def _may_start(self) -> bool:
        return self.st.state == "running" and not self.failed

    async def _run_cluster(
        self, inp: OperationInput, name: str, clock: ClockInfo, running: dict[str, Any]
    ) -> None:
        st = self.st
        progress = st.clusters[name]
        try:
            handle = await workflow.start_child_workflow(
                ClusterOperation.run,
                ClusterOpInput(
                    spec=inp.spec, operation_id=st.operation_id, cluster=name, clock=clock
                ),
                id=progress.workflow_id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=(
                    f"{st.kind} {st.targets} on {name}: waves of drain, change, verify"
                ),
            )
            self.children[name] = handle
            if st.state in ("paused", "aborting"):  # changed while the child was starting
                await self._tell_children("pause" if st.state == "paused" else "abort", st.reason)
            st.clusters[name] = await handle
        except ChildWorkflowError as err:
            cause = err.cause
            details = cause.details if isinstance(cause, ApplicationError) else ()
            if details and isinstance(details[0], dict):
                progress = ClusterProgress.model_validate(details[0])
            else:
                progress = st.clusters[name]
            progress.state = "failed"
            progress.reason = progress.reason or str(getattr(cause, "message", err))
            st.clusters[name] = progress
            if not self.failed:
                self.failed = f"{name}: {progress.reason}"
                await self._tell_children("abort", f"stopped: {self.failed}")
        finally:
            self.children.pop(name, None)
            running.pop(name, None)
            self.changed = True

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
                type="OperationFailed",
                non_retryable=True,
            )
        return self.status()
