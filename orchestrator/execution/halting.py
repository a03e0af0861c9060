"""The halting rule: when failing hosts mean a bad build rather than bad luck, stop taking more.

Two triggers, folded over hosts' pass/fail outcomes in completion order: ``after_failures``
hosts failing in a row, or more than ``failure_rate`` of the cycle's hosts failing once at least
``MIN_SAMPLE`` were seen. Pure and deterministic, so the train folds its domains' outcomes through
it inside the workflow and the simulator folds its own through the very same code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from orchestrator.planning import failure_gate

#: Outcomes of a cycle seen before the failure-rate trigger may fire (one host failing first
#: is not a 100% failure rate).
MIN_SAMPLE = 10


class HaltCounters(Protocol):
    """Counters the rule keeps (a train keeps them in its state across continue-as-new)."""

    failures_in_a_row: int
    cycle_visits: int
    cycle_failures: int


@dataclass
class Counters:
    """Counters for callers with no state of their own to keep them in (the simulator)."""

    failures_in_a_row: int = 0
    cycle_visits: int = 0
    cycle_failures: int = 0


@dataclass(frozen=True)
class HaltRule:
    after_failures: int
    failure_rate: float

    def fold(self, c: HaltCounters, outcomes: Iterable[bool]) -> str | None:
        """Count ``outcomes`` into ``c``; why to halt, or None."""
        why: str | None = None
        for passed in outcomes:
            c.failures_in_a_row = 0 if passed else c.failures_in_a_row + 1
            c.cycle_visits += passed
            c.cycle_failures += not passed
            if why is None and c.failures_in_a_row >= self.after_failures:
                why = f"{c.failures_in_a_row} hosts failed in a row (limit {self.after_failures})"
        seen = c.cycle_visits + c.cycle_failures
        if why is None and seen >= MIN_SAMPLE and c.cycle_failures / seen > self.failure_rate:
            why = (
                f"{c.cycle_failures} of {seen} hosts failed this cycle "
                f"(above {self.failure_rate:.0%})"
            )
        return why


@dataclass(frozen=True)
class BadBuildRule:
    """Halt only on a bad build: the cycle's failures more than bad hosts alone explain.

    ``planning.failure_gate``'s one-sided exact binomial test over the cycle's hosts so far,
    against the fleet's ``base_rate`` of change failures (the backend's
    ``change_failure_rate`` for the components changed). This is what stands behind a train a
    campaign drives (its train never halts on failures in a row, ``NO_HALT``; the campaign's
    gate judges with this test), so three flaky hosts in a row are three bad hosts, quarantined,
    not a reason to stop a cycle. Same ``fold`` as ``HaltRule``, same counters, judged once
    ``MIN_SAMPLE`` hosts were counted.
    """

    base_rate: float
    false_alarm: float = failure_gate.DEFAULT_FALSE_ALARM

    def fold(self, c: HaltCounters, outcomes: Iterable[bool]) -> str | None:
        """Count ``outcomes`` into ``c``; why to halt, or None."""
        failed = False
        before = c.cycle_visits + c.cycle_failures
        for passed in outcomes:
            c.failures_in_a_row = 0 if passed else c.failures_in_a_row + 1
            c.cycle_visits += passed
            c.cycle_failures += not passed
            failed |= not passed
        seen = c.cycle_visits + c.cycle_failures
        # As the rate trigger: a batch's install failures are counted before its passes are
        # verified, so the first hosts counted are not a sample. Past it, passes alone only make
        # the failures so far less significant.
        if seen < MIN_SAMPLE or (not failed and before >= MIN_SAMPLE):
            return None
        verdict = failure_gate.judge(c.cycle_failures, seen, self.base_rate, self.false_alarm)
        return verdict.reason if verdict.bad else None
