"""A circuit breaker per cluster: its settings and what ``trainctl breaker status`` shows.

When hosts fail faster than any one owner can tell (a bad batch of hardware, a broken image
mirror, a datacenter problem), every train and operation on the cluster should stop together.
The breaker counts hosts quarantined or failing verification on the cluster, by any trainctl
owner (the first failure of a host counts, whatever a later repair does), in a sliding window
of fleet time; one failure more than ``max_failures`` within ``window`` opens it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.contracts.models import DurationHours, parse_duration_hours

#: Defaults: more than 10 hosts failing within 6 fleet hours on one cluster is no bad luck (at
#: the base rate of about 2% per visit, a train visiting 8 hosts at a time sees one in hours).
DEFAULT_MAX_FAILURES = 10
DEFAULT_WINDOW_HOURS = 6.0


class BreakerSettings(BaseModel):
    """``breaker: {max_failures: 10, window: 6h}`` (a Slurm backend config; the simulated
    fleet's ``fleet init --breaker-max-failures/--breaker-window``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The failures the window tolerates; one more opens the breaker.
    max_failures: int = Field(default=DEFAULT_MAX_FAILURES, ge=1, le=1_000_000)
    #: The sliding window, in fleet time.
    window_hours: DurationHours = Field(default=DEFAULT_WINDOW_HOURS, alias="window")

    @field_validator("window_hours", mode="before")
    @classmethod
    def _window(cls, v: object) -> float:
        hours = parse_duration_hours(v, "window")
        if hours <= 0:
            raise ValueError("window: must be above zero")
        return hours


class BreakerReset(BaseModel):
    """One reset of a breaker: who, why, when, and what it resumed."""

    who: str
    reason: str = ""
    at: datetime
    resumed: list[str] = Field(default_factory=list)


class BreakerView(BaseModel):
    """What ``trainctl breaker status`` prints (and ``reset`` after it)."""

    cluster: str
    state: Literal["closed", "open"] = "closed"
    failures_in_window: int = 0
    failing_hosts: list[str] = Field(default_factory=list)
    max_failures: int = DEFAULT_MAX_FAILURES
    window_hours: float = DEFAULT_WINDOW_HOURS
    opened_at: datetime | None = None
    reason: str = ""  # why it opened
    paused: list[str] = Field(default_factory=list)  # workflow ids it paused
    last_reset: BreakerReset | None = None
