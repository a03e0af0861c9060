"""``batch:`` in an operation spec: waves that grow while they succeed.

::

    batch: {start: 2, growth: exponential, max: 32, success_threshold: 0.95,
            failure_threshold: 2, safety_limit: 0.8}

A wave (a batch) succeeds when at least ``success_threshold`` of its hosts verify. After a
success the next batch grows, by ``step`` hosts (``linear``) or twice as large
(``exponential``), up to ``max`` and never above the budget; after a failed batch the size goes
back to ``start``; ``failure_threshold`` failed batches in a row stop the rollout, unless more
than ``safety_limit`` of the scope is done already (then failed batches no longer stop it).
``max_failures`` and the bad-build rule always take precedence. A batch is rounded up to whole
consistency groups (a ``consistency: job`` wave holds whole jobs). The rule itself, pure, is
``orchestrator.execution.batches``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["BatchPolicy"]


class BatchPolicy(BaseModel):
    """How wave sizes grow on success and shrink on failure."""

    model_config = ConfigDict(extra="forbid")

    #: Hosts in the first batch, and after a failed one.
    start: int = Field(default=2, ge=1, le=100_000)
    #: ``linear``: each success adds ``step`` hosts; ``exponential``: each success doubles.
    growth: Literal["linear", "exponential"] = "exponential"
    #: Hosts a success adds under ``linear`` growth.
    step: int = Field(default=2, ge=1, le=100_000)
    #: The largest batch (the budget caps it too).
    max: int = Field(default=32, ge=1, le=100_000)
    #: Share of a batch's hosts that must verify for it to succeed.
    success_threshold: float = Field(default=0.95, gt=0, le=1)
    #: Failed batches in a row that stop the rollout.
    failure_threshold: int = Field(default=2, ge=1, le=1_000)
    #: Share of the scope done past which failed batches no longer stop the rollout.
    safety_limit: float = Field(default=0.8, ge=0, le=1)

    @model_validator(mode="after")
    def _start_within_max(self) -> BatchPolicy:
        if self.start > self.max:
            raise ValueError(f"start: {self.start} is more than max ({self.max})")
        return self
