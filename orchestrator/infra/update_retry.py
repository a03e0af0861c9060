"""Sending a Workflow Update the way Temporal asks: retry what it says may be retried, briefly.

A flood of ``pause``/``resume`` on one workflow meets Temporal's own limits: at most 10 updates
in flight per workflow (``RESOURCE_EXHAUSTED``: "limit on number of concurrent in-flight
updates"), and updates the server aborts when the workflow's update registry is reset
("workflow update was aborted", ``UNAVAILABLE``/``ABORTED``). Both clear in moments, so
:func:`execute_update` retries them with bounded, jittered exponential back-off (about 15 s in
all) and then raises :class:`UpdateLimitReached` naming the limit (the CLI exits 1). A
rejection carrying no reason at all ("Application error", or an empty message) is retried too
(a validator that raced a state change) and then reported as such, never bare. Anything else
(a real refusal, a workflow that ended, a timeout) is the caller's to map, unchanged.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.contracts.errors import TemporaryError

#: Tries in all, and the back-off: 0.1 s doubling to at most 2 s, with jitter.
ATTEMPTS = 10
FIRST_DELAY, MAX_DELAY = 0.1, 2.0

_RETRYABLE_STATUS = (
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.ABORTED,
)
_RETRYABLE_TEXT = ("in-flight update", "update was aborted", "concurrent", "try again")
#: What a rejection without a reason says once converted.
_NO_REASON = ("", "application error")


class UpdateLimitReached(TemporaryError, RuntimeError):
    """Temporal kept refusing the update for a limit or an abort; exit 1, naming it."""


def retryable(err: BaseException) -> str | None:
    """Why ``err`` is worth another try (Temporal's words), or None."""
    if isinstance(err, RPCError):
        text = " ".join(err.message.split())
        if err.status in _RETRYABLE_STATUS or any(t in text.lower() for t in _RETRYABLE_TEXT):
            if "total" in text.lower():  # the lifetime total of updates: waiting cannot help
                return None
            return text or err.status.name
        return None
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        message = cause.message if isinstance(cause, ApplicationError) else str(cause or "")
        low = " ".join(str(message).split()).lower()
        if "aborted" in low:
            return str(message)
        if low in _NO_REASON and not (isinstance(cause, ApplicationError) and cause.non_retryable):
            kind = cause.type if isinstance(cause, ApplicationError) and cause.type else "no type"
            return f"rejected without a reason ({kind})"
    return None


async def execute_update(
    handle: WorkflowHandle[Any, Any],
    name: str,
    arg: Any,
    *,
    result_type: type,
    rpc_timeout: timedelta,
    attempts: int = ATTEMPTS,
) -> Any:
    """``handle.execute_update(name, arg)``, retrying what Temporal says may be retried."""
    delay = FIRST_DELAY
    for attempt in range(1, attempts + 1):
        try:
            return await handle.execute_update(
                name, arg, result_type=result_type, rpc_timeout=rpc_timeout
            )
        except (RPCError, WorkflowUpdateFailedError) as err:
            why = retryable(err)
            if why is None:
                raise
            if attempt == attempts:
                raise UpdateLimitReached(
                    f"{name}: Temporal refused the update {attempts} times over "
                    f"~{_budget(attempts):.0f} s: {why}; too many updates at once on "
                    f"{handle.id}? try again"
                ) from None
        await asyncio.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter only
        delay = min(MAX_DELAY, delay * 2)
    raise AssertionError("unreachable")


def _budget(attempts: int) -> float:
    total, delay = 0.0, FIRST_DELAY
    for _ in range(attempts - 1):
        total += delay
        delay = min(MAX_DELAY, delay * 2)
    return total
