"""The daemon: a Temporal worker running every workflow and activity of trainctl.

Several workers may run at once (on one machine they share the SQLite fleet, whose transactions
serialise them); Temporal hands each task to one of them and retries activities of a worker that
died on another. SIGTERM drains gracefully: the worker stops polling and lets running activities
finish before exiting. A daemon outlives its server: when the Temporal server goes away (a
restart, a rolling upgrade) the worker fails, and :func:`serve` reconnects with a back-off and
runs a new one, until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from activities import build_activities
from orchestrator.contracts.constants import RELEASE, TASK_QUEUE
from orchestrator.contracts.errors import TemporaryError
from orchestrator.fleet import StoreRef, heartbeats
from orchestrator.fleet.fleet_id import read_fleet_id, worker_identity
from orchestrator.fleet.store_db import Database
from orchestrator.infra.logging import get_logger
from workflows import WORKFLOWS

log = get_logger(__name__)

#: Seconds between attempts to reach a server that went away, growing to the last.
RECONNECT_DELAYS = (1.0, 2.0, 5.0, 10.0, 15.0)
#: How long one reconnection attempt may take.
RECONNECT_TIMEOUT = 10.0


def build_worker(
    client: Client, fleet_path: StoreRef, task_queue: str = TASK_QUEUE, concurrency: int = 8
) -> Worker:
    """A worker with every workflow and activity, activities on a small thread pool of
    ``concurrency`` threads and slots; its identity names the fleet it serves (``fleet_id``),
    so commands can tell fleets apart."""
    base = f"{os.getpid()}@{socket.gethostname()} trainctl/{RELEASE}"
    identity = worker_identity(base, read_fleet_id(fleet_path))
    return Worker(
        client,
        task_queue=task_queue,
        identity=identity,
        workflows=WORKFLOWS,
        activities=build_activities(fleet_path, client, task_queue),
        activity_executor=ThreadPoolExecutor(max_workers=concurrency),
        max_concurrent_activities=concurrency,
        graceful_shutdown_timeout=timedelta(seconds=30),
    )


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT; install it before anything else can be interrupted."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_until_signalled(worker: Worker, stop: asyncio.Event | None = None) -> None:
    """Run ``worker`` until SIGTERM or SIGINT, then shut it down gracefully."""
    stop = stop or stop_on_signals()
    async with worker:
        log.info("worker started", task_queue=worker.task_queue)
        await stop.wait()
        log.info("worker stopping: finishing running activities")
    log.info("worker stopped")


async def serve(
    client: Client,
    fleet_path: StoreRef,
    task_queue: str,
    stop: asyncio.Event,
    reconnect: Callable[[], Awaitable[Client]],
) -> None:
    """Run a worker until ``stop``; if it fails (its server went away), reconnect and go on.

    Workflows lose nothing meanwhile: their state is on the server, and activities a failed
    worker was running time out there and are retried by the next worker. A stop drains the
    running worker gracefully, as :func:`run_until_signalled` does.
    """
    while True:
        worker = build_worker(client, fleet_path, task_queue)
        run = asyncio.create_task(worker.run())
        stopping = asyncio.create_task(stop.wait())
        log.info("worker started", task_queue=task_queue)
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            log.info("worker stopping: finishing running activities")
            if not run.done():
                await worker.shutdown()
            with contextlib.suppress(Exception):
                await run
            log.info("worker stopped")
            return
        stopping.cancel()
        err = run.exception()
        log.warning("worker failed; reconnecting to the server", error=str(err)[:300])
        again = await _reconnect(reconnect, stop)
        if again is None:
            log.info("worker stopped")
            return
        client = again


async def _reconnect(
    reconnect: Callable[[], Awaitable[Client]], stop: asyncio.Event
) -> Client | None:
    """A new client once the server answers again, or None if stopped first."""
    for attempt in range(1_000_000):
        delay = RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        if stop.is_set():
            return None
        try:
            client = await asyncio.wait_for(reconnect(), RECONNECT_TIMEOUT)
        except (RuntimeError, TimeoutError, OSError) as err:
            log.info("server not reachable yet", attempt=attempt + 1, error=str(err)[:200])
            continue
        log.info("reconnected to the server", attempts=attempt + 1)
        return client
    return None


class _Heartbeat:
    """This process's row in the fleet store's ``workers`` table (``fleet.heartbeats``)."""

    def __init__(self, store: StoreRef) -> None:
        self.path = store
        self.id = heartbeats.new_worker_id()
        self.db: Database | None = None

    def beat(self) -> None:
        if self.db is None:
            self.db = heartbeats.open_beats(self.path)
        heartbeats.beat(self.db, self.id, self.path)

    def leave(self) -> None:
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error, TemporaryError):
                heartbeats.leave(self.db, self.id)
            self.db.close()
            self.db = None

    async def renew(self) -> None:
        while True:
            await asyncio.sleep(heartbeats.RENEW_SECONDS)
            try:
                await asyncio.to_thread(self.beat)
            except (sqlite3.Error, TemporaryError) as err:  # busy or away: the next one tries
                log.warning("worker heartbeat not recorded", error=str(err)[:200])


@contextlib.asynccontextmanager
async def heartbeat(fleet_path: StoreRef) -> AsyncIterator[str]:
    """Record this worker as alive in the fleet store while the block runs (renewed every
    ``heartbeats.RENEW_SECONDS`` by a background task), and remove it on the way out; the
    worker's id. The first heartbeat is written before the block starts."""
    hb = _Heartbeat(fleet_path)
    await asyncio.to_thread(hb.beat)
    task = asyncio.create_task(hb.renew())
    try:
        yield hb.id
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.to_thread(hb.leave)
