"""The bad-build rule (``planning.failure_gate``): exact bounds, monotone thresholds, words."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.fleet.sim_health import component_failure_rate
from orchestrator.planning.failure_gate import (
    DEFAULT_FALSE_ALARM,
    MIN_BASE_RATE,
    GateVerdict,
    build_is_bad,
    clamp_base_rate,
    failure_threshold,
    judge,
    tail_probability,
)

RATES = [MIN_BASE_RATE, 0.005, 0.006, 0.01, 0.02, 0.05, 0.1, 0.2]
ALARMS = [0.0001, 0.001, 0.01, 0.05]


def exact_tail(k: int, n: int, p: float) -> Fraction:
    """P(X >= k) for X ~ Binomial(n, p), as an exact rational (p as written in decimal: the
    rule's float differs from it by far less than the rule's 1e-9 slack on the bound)."""
    q = Fraction(repr(p))
    return 1 - sum((comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k)), Fraction(0))


@pytest.mark.parametrize("alarm", ALARMS)
@pytest.mark.parametrize("rate", RATES)
def test_threshold_bounds_the_false_alarm_rate_exactly(rate, alarm):
    """For every size up to 80, a good build exceeds the threshold with chance <= false_alarm,
    and the threshold is the smallest with that property (exact rational binomial sums)."""
    for n in range(0, 81, 1 if rate <= 0.01 else 5):
        t = failure_threshold(n, rate, alarm)
        assert exact_tail(t + 1, n, rate) <= Fraction(alarm), (n, t)
        if t > 0:  # one failure fewer allowed would break the bound (tiny float slack)
            assert exact_tail(t, n, rate) > Fraction(alarm) * Fraction(1 - 1e-6), (n, t)


def test_threshold_is_monotone_in_hosts_exhaustively():
    """More changed hosts never lower the number of failures a good build may have."""
    for rate in RATES:
        for alarm in ALARMS:
            last = 0
            for n in range(0, 300):
                t = failure_threshold(n, rate, alarm)
                assert last <= t <= n
                last = t


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 5000),
    extra=st.integers(0, 500),
    rate=st.floats(0.0, 0.3),
    alarm=st.floats(1e-6, 0.2),
)
def test_threshold_is_monotone_in_hosts_rate_and_strictness(n, extra, rate, alarm):
    """The threshold grows with the hosts changed and the base rate, and shrinks as the
    tolerated false-alarm chance grows."""
    t = failure_threshold(n, rate, alarm)
    assert t <= failure_threshold(n + extra, rate, alarm)
    assert t <= failure_threshold(n, min(0.33, rate * 1.5 + 0.001), alarm)
    assert failure_threshold(n, rate, min(0.5, alarm * 4)) <= t
    assert tail_probability(t + 1, n, rate) <= alarm


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 200), rate=st.sampled_from(RATES), alarm=st.sampled_from(ALARMS))
def test_float_tail_matches_exact_sum(n, rate, alarm):
    """The p-value summed in floats agrees with the exact rational sum."""
    t = failure_threshold(n, rate, alarm)
    for k in {0, 1, t, t + 1, min(n, t + 3)}:
        exact = float(exact_tail(k, n, clamp_base_rate(rate)))
        assert tail_probability(k, n, rate) == pytest.approx(exact, rel=1e-9, abs=1e-300)


def test_one_host_failing_alone_is_never_a_bad_build():
    """A single failure is a bad host at any size and any base rate (the floor sees to it)."""
    for n in (1, 2, 4, 8, 64, 3072):
        for rate in (0.0, 1e-9, MIN_BASE_RATE, 0.006):
            assert not build_is_bad(1, n, rate)


def test_a_build_breaking_a_fifth_of_a_cluster_is_bad():
    """13 failures among 64 changed hosts (20%) is a bad build at the fleet's base rate."""
    assert build_is_bad(13, 64, 0.006)
    assert build_is_bad(4, 4, 0.006) and build_is_bad(2, 4, 0.006)


def test_base_rate_is_floored_and_capped():
    """A base rate of 0 (or NaN) is taken as the floor; one near 1 as the cap."""
    assert clamp_base_rate(0.0) == clamp_base_rate(float("nan")) == MIN_BASE_RATE
    assert clamp_base_rate(0.9) == 0.33
    assert failure_threshold(100, 0.0) == failure_threshold(100, MIN_BASE_RATE)


def test_verdict_says_why_in_plain_words():
    """The verdict carries its figures and a sentence naming hosts, failures and the rate."""
    good = judge(1, 127, 0.006)
    assert isinstance(good, GateVerdict) and not good.bad
    assert good.threshold == failure_threshold(127, 0.006) and good.changed == 127
    assert good.reason.startswith("bad hosts, not a bad build: 1 of 127 changed hosts failed")
    bad = judge(9, 64, 0.006)
    assert bad.bad and bad.failures == 9 and bad.base_rate == 0.006
    assert bad.reason.startswith("bad build: 9 of 64 changed hosts failed")
    assert "0.60%" in bad.reason


def test_bad_input_names_the_field():
    """Negative counts and a false-alarm chance outside (0, 1) are refused, naming the field."""
    with pytest.raises(ValueError, match="changed"):
        failure_threshold(-1, 0.01)
    with pytest.raises(ValueError, match="failures"):
        build_is_bad(-1, 4, 0.01)
    with pytest.raises(ValueError, match="false_alarm"):
        failure_threshold(4, 0.01, 0.0)


def test_fleet_base_rate_of_a_cuda_upgrade():
    """The fleet's base rate for changing driver and CUDA comes from its hardware fault rates:
    about 0.6% (driver: 0.1% broken installs, 0.3% bad returns; CUDA: 0.2% bad returns)."""
    rate = component_failure_rate(["gpu_driver", "cuda"])
    assert 0.0059 < rate < 0.0061
    assert component_failure_rate([]) == 0.0
    assert DEFAULT_FALSE_ALARM == 0.0005
