"""The baseline of bench_train: a no-op host pipeline of eight activities.

It lives in its own module because the workflow sandbox re-imports a workflow's module, which must
not be the benchmark script itself.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="noop")
def noop(step: int) -> int:
    return step


@workflow.defn(name="NoopHost")
class NoopHost:
    @workflow.run
    async def run(self, host: str) -> None:
        for step in range(8):
            await workflow.execute_activity(
                noop, step, start_to_close_timeout=timedelta(seconds=30)
            )
