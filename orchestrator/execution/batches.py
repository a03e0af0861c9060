"""Growing batches: the size of an operation's next wave, and whether failures stop it.

Pure arithmetic over a :class:`~orchestrator.contracts.batch_policy.BatchPolicy` and the
outcome of each batch, kept in the cluster's progress (``batch_size``, ``batch_failures_in_row``)
so it survives continue-as-new. The ``ClusterOperation`` workflow caps each wave at
:func:`next_batch` and folds each wave's outcome in with :func:`judge_batch`; the cut rounds the
batch up to whole consistency groups (:func:`round_up_to_groups`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from orchestrator.contracts.batch_policy import BatchPolicy

__all__ = [
    "BatchVerdict",
    "batch_of",
    "domain_size_now",
    "judge_batch",
    "next_batch",
    "round_up_to_groups",
]


def next_batch(policy: BatchPolicy, current: int | None, budget: int) -> int:
    """The next batch's size: ``current`` (``start`` before the first), never above the
    ``budget`` (and never below one host)."""
    size = policy.start if current is None else current
    return max(1, min(size, policy.max, budget))


def batch_of(policy: BatchPolicy | None, current: int | None, budget: int) -> int | None:
    """The next wave's batch under ``policy`` (None: no policy, the wave fills the budget)."""
    return None if policy is None else next_batch(policy, current, budget)


def domain_size_now(domain_size: int, policy: BatchPolicy | None, current: int | None) -> int:
    """The hosts a train keeps in maintenance at once: its ``domain_size``, or under a ``batch``
    policy the current batch (the arbiter's grant caps either)."""
    return domain_size if policy is None else next_batch(policy, current, policy.max)


@dataclass(frozen=True)
class BatchVerdict:
    """What one batch's outcome means: the size of the next, failures in a row, and why the
    rollout stops ('' to go on)."""

    next_size: int
    failures_in_row: int
    succeeded: bool
    stop: str = ""


def judge_batch(
    policy: BatchPolicy,
    size: int,
    verified: int,
    failed: int,
    failures_in_row: int,
    done_share: float,
) -> BatchVerdict:
    """Fold one batch in: ``verified`` and ``failed`` of its hosts; ``done_share`` the share of
    the scope done after it (past ``safety_limit`` failed batches no longer stop the rollout)."""
    total = verified + failed
    if total == 0 or verified / total >= policy.success_threshold:
        grown = size + policy.step if policy.growth == "linear" else size * 2
        return BatchVerdict(min(grown, policy.max), 0, True)
    in_row = failures_in_row + 1
    stop = ""
    if in_row >= policy.failure_threshold and done_share < policy.safety_limit:
        stop = (
            f"batch: {in_row} failed batches in a row (failure_threshold "
            f"{policy.failure_threshold}; the last: {verified} of {total} hosts verified, "
            f"under success_threshold {policy.success_threshold:g})"
        )
    return BatchVerdict(policy.start, in_row, False, stop)


def round_up_to_groups(
    hosts: Sequence[str], size: int, group_of: Callable[[str], Hashable]
) -> list[str]:
    """The first whole groups of ``hosts`` (in order) holding at least ``size`` hosts, or all
    of them: a batch never splits a consistency group."""
    groups: dict[Hashable, list[str]] = {}
    for h in hosts:
        groups.setdefault(group_of(h), []).append(h)
    out: list[str] = []
    for members in groups.values():
        if len(out) >= size:
            break
        out.extend(members)
    return out
