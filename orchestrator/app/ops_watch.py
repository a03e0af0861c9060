"""The worker's watch over bulk operations: their status into ``trainctl_operation_*`` gauges.

An operation's figures (waves done and planned, hosts changed, failed, deferred, its state) live
in its workflow, which no activity is told about; reading them where ``ops status`` does (the
``status`` query of each running ``BulkOperation``, the final status once it has ended) keeps
the metrics and the command one story, and changes no workflow. Every ``every`` seconds the
watch lists the running operations, asks each, and reports once more the final status of those
it saw end; an ended operation's series stay ``keep`` seconds (so an alert on a failed one fires
and resolves), then go. Each worker serving /metrics watches (the figures are the same from
every one); an error (the server restarting) skips a round, it never stops the worker. It also
clears the cycle and budget series of a train another worker stopped (``metrics.clear_train``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.contracts.train_spec import train_workflow_id
from orchestrator.infra.logging import get_logger
from orchestrator.ops.client import WORKFLOW_NAME, OperationNotFound, operation_status
from orchestrator.telemetry import metrics

log = get_logger(__name__)

#: Seconds between two looks (about a Prometheus scrape interval).
EVERY = 15.0
#: Seconds an ended operation's series are kept.
KEEP = 3600.0
FINAL = frozenset({"succeeded", "failed", "aborted"})
RUNNING = f"WorkflowType = '{WORKFLOW_NAME}' AND ExecutionStatus = 'Running'"


class OperationWatch:
    """One look at a time (``look``); ``run`` looks forever."""

    def __init__(self, client: Client, keep: float = KEEP) -> None:
        self.client = client
        self.keep = keep
        self.live: set[str] = set()  # running at the last look
        self.ended: dict[str, float] = {}  # operation -> monotonic time its end was reported

    async def look(self) -> None:
        running = {wf.id async for wf in self.client.list_workflows(RUNNING)}
        gone: set[str] = set()
        for op in sorted(running | self.live):
            try:
                status = await operation_status(self.client, op)
            except OperationNotFound:  # deleted: nothing to report, ever
                metrics.forget_operation(op)
                gone.add(op)
                continue
            except Exception as err:  # this one does not answer now: the next look asks again
                log.debug("operation status not read", operation=op, error=str(err))
                continue
            metrics.operation_report(status)
            if op not in running and status.state in FINAL:
                self.ended[op] = time.monotonic()
        # An operation leaves the watch once its final status is reported (or it is gone).
        self.live = running | ({op for op in self.live if op not in self.ended} - gone)
        await self._trains()
        now = time.monotonic()
        for op, since in list(self.ended.items()):
            if op in running:  # the same id again (a new run after a failed one)
                del self.ended[op]
            elif now - since >= self.keep:
                metrics.forget_operation(op)
                del self.ended[op]

    async def _trains(self) -> None:
        """A train another worker stopped leaves its cycle series here too: clear them once its
        workflow no longer runs (the worker that closed it cleared its own at once)."""
        for cluster in sorted(metrics.train_clusters()):
            try:
                desc = await self.client.get_workflow_handle(train_workflow_id(cluster)).describe()
                ended = desc.status != WorkflowExecutionStatus.RUNNING
            except RPCError as err:
                ended = err.status == RPCStatusCode.NOT_FOUND
            except Exception as err:  # ask again next look
                log.debug("train not described", cluster=cluster, error=str(err))
                ended = False
            if ended:
                metrics.clear_train(cluster)

    async def run(self, every: float = EVERY) -> None:
        while True:
            try:
                await self.look()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the server restarting, say: try again next round
                log.warning("operation metrics not read", error=str(err))
            await asyncio.sleep(every)


@contextlib.asynccontextmanager
async def watching(client: Client, every: float = EVERY) -> AsyncIterator[asyncio.Task[None]]:
    """Watch operations while the block runs (the worker's life)."""
    task = asyncio.create_task(OperationWatch(client).run(every))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
