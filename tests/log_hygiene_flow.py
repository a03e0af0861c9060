"""The workflow and activity the log-hygiene tests run, in a module of their own: the workflow
sandbox re-imports a workflow's module, and re-importing a test module runs pytest's assertion
rewriting inside the sandbox (on Python 3.11.7 that can fail with "AST constructor recursion
depth mismatch")."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from orchestrator.contracts.errors import TemporaryError

#: A value only a frame's locals hold: it must never reach a log line.
LOCAL_SECRET = "LOCAL-ONLY-5e1f0c2a9d"


class BackendAsleep(TemporaryError):
    """A temporary error as a backend raises one."""


_CALLS: dict[str, int] = {}


@activity.defn(name="log-hygiene.flaky")
async def flaky(key: str) -> str:
    """A bug on its first attempt, a temporary error on the next two, then an answer; every
    attempt holds a secret in a local variable."""
    kept = LOCAL_SECRET
    _CALLS[key] = attempt = _CALLS.get(key, 0) + 1
    if attempt == 1:
        raise ValueError(f"a bug on attempt {attempt}")
    if attempt <= 3:
        raise BackendAsleep(f"backend asleep (attempt {attempt})\nsecond line of the message")
    return kept[:4]


@workflow.defn(name="log-hygiene.flow")
class Flow:
    @workflow.run
    async def run(self, key: str, retries: bool) -> str:
        kept = LOCAL_SECRET
        try:
            raise ValueError("boom inside the sandbox")
        except ValueError:
            workflow.logger.exception("the workflow logs an exception")
        if not retries:
            return kept[:4]
        return kept[:4] + await workflow.execute_activity(
            flaky,
            key,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=0.25), maximum_attempts=5),
        )
