"""Heartbeats that cost nothing on quick steps.

An install heartbeats once per host, and about every second while a site hook runs
(``contracts.liveness``), so that a slow one (a real Slurm node's hooks, minutes per host) is
seen alive well within its heartbeat timeout. The SDK sends the first heartbeat at
once, so a step of a few milliseconds (a simulated fleet at speed ``max``) would pay a billable
heartbeat for nothing: this one stays silent for the step's first seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from temporalio import activity

#: Nothing is sent before the step has run this long (its heartbeat timeout is 30 s).
HEARTBEAT_GRACE_SECONDS = 5.0


def patient_heartbeat(grace: float = HEARTBEAT_GRACE_SECONDS) -> Callable[..., None]:
    """``activity.heartbeat`` for the running activity, silent for its first ``grace`` s."""
    start = time.monotonic()

    def beat(*details: object) -> None:
        if time.monotonic() - start >= grace:
            activity.heartbeat(*details)

    return beat
