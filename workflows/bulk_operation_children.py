"""How a bulk operation keeps track of its clusters' child workflows: telling them to pause,
resume or abort, catching a child up on what the operation decided before it started, taking
in their reports, noticing one that ended without reporting, and cancelling them.

A part of the ``BulkOperation`` workflow (a mixin over its state), kept apart for size: the
workflow module keeps its handlers, its loop, how it starts a child and how it finishes.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import CancelledError
from temporalio.workflow import ChildWorkflowHandle

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from orchestrator.contracts.arbiter_types import HoldersRequest
    from orchestrator.contracts.ops_types import (
        FINAL_STATES,
        ClusterControl,
        ClusterProgress,
        ControlAction,
        OperationStatus,
    )
    from workflows.cluster_operation import ClusterOperation
    from workflows.fleet_timing import fleet_options

#: How often, and how many times, to look whether a child that reported has also completed.
CLOSE_CHECK_INTERVAL = timedelta(seconds=1)
CLOSE_CHECKS = 10


class ClusterChildren:
    """The operation's children, told, caught up, taken in; the workflow provides the state."""

    st: OperationStatus
    children: dict[str, ChildWorkflowHandle[Any, ClusterProgress]]
    failed: str
    changed: bool
    running: dict[str, asyncio.Task[None] | None]
    starting: set[str]
    reported: dict[str, ClusterProgress]
    failure_told: bool
    seen_closed: set[str]

    # Provided by the BulkOperation workflow.
    def _show(self) -> None: ...

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
            closed: list[str] = await workflow.execute_activity_method(
                ArbiterActivities.closed_workflows,
                HoldersRequest(holders=sorted(open_ids)),
                summary="check that the clusters which reported have closed",
                **fleet_options(),
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
        closed: list[str] = await workflow.execute_activity_method(
            ArbiterActivities.closed_workflows,
            HoldersRequest(holders=sorted(ids)),
            summary="check that the rejoined clusters still run",
            **fleet_options(),
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
