"""The worker's watch over each cluster's circuit breaker: trip, pause everything, reset.

Every ``EVERY`` seconds the watch reads each cluster's failures in its window from the store
(``fleet.breaker_store``). When they pass the cluster's ``max_failures`` it opens the breaker
(once, however many workers watch) and pauses, through their own ``pause`` updates, the
cluster's train and every running bulk operation that covers the cluster, with the breaker's
reason; while it stays open it pauses whatever starts there meanwhile. Each workflow it paused
is recorded, and ``trainctl breaker reset`` resumes exactly those: a train or an operation an
operator had paused before stays paused.

A campaign's rollback operations are left running while the breaker is open: they put hosts
back on versions that were serving before, which is what on-call wants when hosts fail
everywhere; pausing them would hold hosts on the build that may be the cause.

Nothing here changes a workflow: the pauses are the operators' own controls, sent by the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from temporalio.client import Client

from orchestrator.campaign.rollback import is_rollback_operation
from orchestrator.contracts.breaker_types import BreakerReset, BreakerView
from orchestrator.contracts.train_spec import train_workflow_id
from orchestrator.fleet import breaker_store as store
from orchestrator.fleet.ledger_files import open_store
from orchestrator.fleet.store_url import StoreRef
from orchestrator.infra.logging import get_logger
from orchestrator.ops.client import WORKFLOW_NAME, control_operation, operation_status
from orchestrator.telemetry import metrics
from orchestrator.train.client import control_train, train_status

log = get_logger(__name__)

#: Seconds between two looks.
EVERY = 5.0
RUNNING_OPERATIONS = f"WorkflowType = '{WORKFLOW_NAME}' AND ExecutionStatus = 'Running'"


def _read(ref: StoreRef, cluster: str | None = None) -> list[BreakerView]:
    db = open_store(ref)
    try:
        names = [cluster] if cluster else store.cluster_names(db)
        return [store.breaker_view(db, c) for c in names]
    finally:
        db.close()


def breaker_views(ref: StoreRef, cluster: str | None = None) -> list[BreakerView]:
    """Every cluster's breaker (or one's), as the store has it."""
    return _read(ref, cluster)


async def _pause_train(client: Client, cluster: str, reason: str) -> list[str]:
    try:
        status = await train_status(client, cluster)
    except Exception:  # no train, or it has ended: nothing to pause
        return []
    if status.state in ("paused", "halted", "stopping", "stopped"):
        return []  # paused by an operator already, halted or stopping: not ours to resume
    with contextlib.suppress(Exception):
        await control_train(client, cluster, "pause", reason)
        return [train_workflow_id(cluster)]
    return []


async def _pause_operations(client: Client, cluster: str, reason: str) -> list[str]:
    paused = []
    async for wf in client.list_workflows(RUNNING_OPERATIONS):
        if is_rollback_operation(wf.id, wf.parent_id):
            continue  # rollbacks go on: see the module's docstring
        try:
            status = await operation_status(client, wf.id)
        except Exception:  # it has just ended
            continue
        if cluster not in status.clusters or status.state not in ("running", "waiting_for_room"):
            continue
        with contextlib.suppress(Exception):
            await control_operation(client, wf.id, "pause", reason)
            paused.append(wf.id)
    return paused


async def pause_cluster(client: Client, cluster: str, reason: str, done: list[str]) -> list[str]:
    """Pause the cluster's train and operations not paused yet by the breaker (``done``)."""
    why = f"circuit breaker of {cluster} open: {reason}"
    found = await _pause_train(client, cluster, why) + await _pause_operations(client, cluster, why)
    return [wid for wid in found if wid not in done]


class BreakerWatch:
    """One look at every cluster (``look``); ``run`` looks forever."""

    def __init__(self, client: Client, ref: StoreRef) -> None:
        self.client = client
        self.ref = ref

    async def look(self) -> list[BreakerView]:
        views = []
        for view in await asyncio.to_thread(_read, self.ref):
            if view.state == "closed" and view.failures_in_window > view.max_failures:
                view, opened = await asyncio.to_thread(self._trip, view.cluster)
                if opened:
                    log.warning("circuit breaker open", cluster=view.cluster, reason=view.reason)
            if view.state == "open":
                fresh = await pause_cluster(self.client, view.cluster, view.reason, view.paused)
                if fresh:
                    await asyncio.to_thread(self._note, view.cluster, fresh)
                    view.paused += fresh
            metrics.breaker_report(view)
            views.append(view)
        return views

    def _trip(self, cluster: str) -> tuple[BreakerView, bool]:
        db = open_store(self.ref)
        try:
            return store.trip_if_due(db, cluster, time.time())
        finally:
            db.close()

    def _note(self, cluster: str, paused: list[str]) -> None:
        db = open_store(self.ref)
        try:
            store.note_paused(db, cluster, paused, time.time())
        finally:
            db.close()

    async def run(self, every: float = EVERY) -> None:
        while True:
            try:
                await self.look()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the store or the server restarting: next round
                log.warning("circuit breakers not read", error=str(err))
            await asyncio.sleep(every)


async def reset_breaker(
    client: Client, ref: StoreRef, cluster: str, who: str, reason: str
) -> BreakerView:
    """Close ``cluster``'s breaker and resume exactly what it paused; the view after."""
    (view,) = await asyncio.to_thread(_read, ref, cluster)
    resumed = []
    for wid in view.paused if view.state == "open" else []:
        with contextlib.suppress(Exception):  # ended meanwhile: nothing to resume
            if wid == train_workflow_id(cluster):
                await control_train(client, cluster, "resume", f"breaker reset by {who}: {reason}")
            else:
                await control_operation(client, wid, "resume", f"breaker reset by {who}: {reason}")
            resumed.append(wid)
    if view.state == "open":
        await asyncio.to_thread(_reset, ref, cluster, who, reason, resumed)
    (after,) = await asyncio.to_thread(_read, ref, cluster)
    metrics.breaker_report(after)
    return after


def _reset(ref: StoreRef, cluster: str, who: str, reason: str, resumed: list[str]) -> BreakerReset:
    db = open_store(ref)
    try:
        return store.note_reset(db, cluster, who, reason, resumed, time.time())
    finally:
        db.close()


@contextlib.asynccontextmanager
async def watching_breakers(
    client: Client, ref: StoreRef, every: float = EVERY
) -> AsyncIterator[asyncio.Task[None]]:
    """Watch the breakers while the block runs (the worker's life)."""
    task = asyncio.create_task(BreakerWatch(client, ref).run(every))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
