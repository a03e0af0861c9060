"""Bad host or bad build: when do failures among changed hosts condemn the change itself?

Every change fails on a few hosts for reasons of their own (a GPU that was about to go, a flaky
link): the fleet's *base rate*. A host failing alone is a bad host - quarantine it and go on. A
build is bad only when the failures among the hosts it changed are more than the base rate can
explain. The rule here is the **one-sided exact binomial test**: with ``changed`` hosts each
failing independently at ``base_rate`` under a good build, the number of failures ``X`` is
Binomial(changed, base_rate); the build is bad when ``P(X >= failures) <= false_alarm``.

Why this test (and not an SPRT): a sequential probability ratio test needs the failure rate of a
bad build fixed in advance (say base + 20%), and its boundary then grows like ~6% of the changed
hosts, so on a 3,072-host cluster a build breaking 4% of hosts (123 failures against 18
expected) would never be flagged. The exact test is the most powerful at every sample size
against *every* worse rate, and its false-alarm bound is exact, not asymptotic.

Error rates:

- **False alarm** (a good build judged bad), at one look: at most ``false_alarm`` exactly, by
  construction (``failure_threshold`` is the smallest count whose binomial tail is within it;
  ``tests/test_failure_gate.py`` checks this with exact rational sums). A rollout looks after
  every wave with the counts so far; over ``L`` looks the chance is at most ``L * false_alarm``
  (union bound) and in practice far less, because the looks are nested. With the default
  ``DEFAULT_FALSE_ALARM = 0.0005`` and the fleet's cuda-upgrade base rate of 0.60%, a campaign
  of a 4-host canary and four 64-host clusters in 8-host waves (33 looks) measured **0.21%**
  [0.14%, 0.32%] over 10,000 seeds, a 3,072-host operation in 150-host waves 0.27% (goal <= 1%;
  ``nice python benchmarks/bench_failure_gate.py``).
- **Miss** (a bad build judged good): depends on the sample. A build breaking base + 20% of
  hosts passes a 4-host canary with probability ~0.80 (one failure in four is what a bad host
  does too), but a 64-host cluster lets it through with probability ~0.1%: misses beyond the
  first cluster measured **0.10%** [0.05%, 0.18%] (goal <= 1%).
- **The base rate must be right.** The test is exact *given* the base rate. If good builds
  really fail at 1.5x the assumed rate, the campaign above still measured 0.89% false alarms,
  but one 3,072-host operation 15%: on that many hosts a 50% excess *is* significant. Callers
  pass the fleet's own rate for the components changed (``change_failure_rate`` of the fleet
  backend), not a guess.

The base rate is floored at ``MIN_BASE_RATE``: with a rate of 0 any single failure would be
"infinitely significant", which is exactly the one-flaky-host-fails-the-upgrade behaviour this
replaces. Pure: no I/O, plain numbers in and out.
"""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import BaseModel

from orchestrator.contracts.ui_text import plural

#: Chance, at one look, that a good build is judged bad. 1 in 2,000 keeps a five-stage campaign
#: of 33 looks (waves) at ~0.3% false alarms, under the 1% goal with room for a misestimated
#: base rate, while a 4-host canary still stops at 2 failures and a 64-host cluster stops a
#: build breaking 20% of hosts all but always (module docstring, the benchmark). At 1 in 1,000
#: the same campaign measured 0.8% [0.64%, 0.99%]: too close to the goal; at 1 in 5,000 the
#: canary would need 3 failures of 4 and caught a 20% build 3% of the time instead of 19%.
DEFAULT_FALSE_ALARM = 0.0005
#: The lowest base rate the rule assumes: 1 host in 500 failing some check around a change.
#: Real fleets never do better than that, and a rate of 0 would make one bad host a bad build.
MIN_BASE_RATE = 0.002
#: The highest base rate the rule accepts: a fleet where a third of changes fail cannot tell a
#: bad build from its own noise, and the binomial sums lose meaning near 1.
MAX_BASE_RATE = 0.33
#: Slack on the bound so float rounding can never put the true tail above ``false_alarm``.
_SAFETY = 1.0 - 1e-9


def clamp_base_rate(base_rate: float) -> float:
    """``base_rate`` within [MIN_BASE_RATE, MAX_BASE_RATE] (NaN counts as unknown: the floor)."""
    if math.isnan(base_rate):
        return MIN_BASE_RATE
    return min(MAX_BASE_RATE, max(MIN_BASE_RATE, float(base_rate)))


def _check(changed: int, false_alarm: float) -> None:
    if changed < 0:
        raise ValueError(f"changed: must be >= 0, got {changed}")
    if not 0.0 < false_alarm < 1.0:
        raise ValueError(f"false_alarm: must be between 0 and 1, got {false_alarm}")


def _log_pmf(k: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def tail_probability(failures: int, changed: int, base_rate: float) -> float:
    """``P(X >= failures)`` for X ~ Binomial(changed, base_rate): the test's p-value.

    Summed term by term from ``failures`` upward (never as 1 - cdf, which loses small tails to
    rounding), stopping once the terms no longer matter.
    """
    if failures <= 0:
        return 1.0
    if failures > changed:
        return 0.0
    p = clamp_base_rate(base_rate)
    terms = []
    mode = (changed + 1) * p
    for k in range(failures, changed + 1):
        t = math.exp(_log_pmf(k, changed, p))
        terms.append(t)
        if k > mode and t < 1e-18 * (terms[0] or 1.0):
            break
    return min(1.0, math.fsum(terms))


#: The last threshold found for a (base rate, bound): ``(changed, threshold)``. A rollout looks
#: at one count after another; t(n) never falls as n grows and grows by at most the hosts added
#: (n more hosts can fail at most n more times), so the next search starts within that bracket.
_LAST: dict[tuple[float, float], tuple[int, int]] = {}


@lru_cache(maxsize=4096)
def _threshold(changed: int, p: float, false_alarm: float) -> int:
    # The tail P(X > t) falls as t grows: bisect for the smallest t within the bound. Below
    # the mean it is at least 1/2 (the median is floor or ceil of changed * p), so for a bound
    # under 1/2 the search starts there and every tail it sums is short.
    lo = max(0, math.floor(changed * p) - 1) if false_alarm < 0.5 else 0
    hi = changed  # P(X > changed) = 0: always within the bound
    last = _LAST.get((p, false_alarm))
    if last is not None:
        n0, t0 = last
        if n0 <= changed:
            lo, hi = max(lo, min(t0, hi)), min(hi, t0 + changed - n0)
        else:
            lo, hi = max(lo, min(t0 - (n0 - changed), hi)), min(hi, t0)
        lo = min(lo, hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if tail_probability(mid + 1, changed, p) <= false_alarm * _SAFETY:
            hi = mid
        else:
            lo = mid + 1
    _LAST[(p, false_alarm)] = (changed, lo)
    return lo


def failure_threshold(
    changed: int, base_rate: float, false_alarm: float = DEFAULT_FALSE_ALARM
) -> int:
    """The most failures among ``changed`` hosts that still count as a good build.

    The smallest ``t`` with ``P(X > t) <= false_alarm`` under Binomial(changed, base_rate):
    ``t + 1`` failures are too many to blame on bad hosts. Non-decreasing in ``changed``.
    """
    _check(changed, false_alarm)
    return _threshold(changed, clamp_base_rate(base_rate), float(false_alarm))


def build_is_bad(
    failures: int, changed: int, base_rate: float, false_alarm: float = DEFAULT_FALSE_ALARM
) -> bool:
    """Whether ``failures`` among ``changed`` hosts exceed the base rate significantly."""
    if failures < 0:
        raise ValueError(f"failures: must be >= 0, got {failures}")
    return failures > failure_threshold(changed, base_rate, false_alarm)


class GateVerdict(BaseModel):
    """The rule's answer for one look at a rollout, with the sentence a person reads."""

    bad: bool
    failures: int
    changed: int
    base_rate: float
    threshold: int
    reason: str


def judge(
    failures: int, changed: int, base_rate: float, false_alarm: float = DEFAULT_FALSE_ALARM
) -> GateVerdict:
    """Judge ``failures`` among ``changed`` hosts, and say why in plain words."""
    rate = clamp_base_rate(base_rate)
    threshold = failure_threshold(changed, rate, false_alarm)
    bad = build_is_bad(failures, changed, rate, false_alarm)
    expected = changed * rate
    chance = tail_probability(failures, changed, rate)
    if bad:
        reason = (
            f"bad build: {failures} of {changed} changed hosts failed, more than the "
            f"{plural(threshold, 'bad host')} alone {'explains' if threshold == 1 else 'explain'}"
            f" (base rate {rate:.2%}, {expected:.1f} "
            f"expected; a good build fails this often with chance {chance:.1e}, "
            f"under {false_alarm:.1e})"
        )
    else:
        reason = (
            f"bad hosts, not a bad build: {failures} of {changed} changed hosts failed, "
            f"within the {threshold} the base rate {rate:.2%} allows ({expected:.1f} expected)"
        )
    return GateVerdict(
        bad=bad,
        failures=failures,
        changed=changed,
        base_rate=rate,
        threshold=threshold,
        reason=reason,
    )
