"""The daemon: a Temporal worker running every workflow and activity of trainctl.

Several workers may run at once (on one machine they share the SQLite fleet, whose transactions
serialise them); Temporal hands each task to one of them and retries activities of a worker that
died on another. SIGTERM drains gracefully: the worker stops polling and lets running activities
finish before exiting.
"""

from __future__ import annotations

import asyncio
import signal
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from activities import build_activities
from orchestrator.constants import TASK_QUEUE
from orchestrator.logging import get_logger
from workflows import WORKFLOWS

log = get_logger(__name__)


def build_worker(client: Client, fleet_path: Path, task_queue: str = TASK_QUEUE) -> Worker:
    """A worker with every workflow and activity, activities on a small thread pool."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=build_activities(fleet_path, client, task_queue),
        activity_executor=ThreadPoolExecutor(max_workers=8),
        max_concurrent_activities=8,
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
