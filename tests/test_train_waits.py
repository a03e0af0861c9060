"""A train's pure decisions, without a workflow: when it looks again, what its windows allow, and
what it asks of the planner, the arbiter and its domains."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.contracts.messages import ClockInfo
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.train_types import TrainState
from orchestrator.execution.cycle import POLL_FLEET_HOURS
from orchestrator.execution.train_waits import (
    CAPPED_POLL_FLEET_HOURS,
    EDGE_MIN_SECONDS,
    EDGE_PAST_HOURS,
    MIN_POLL_SECONDS,
    IdleTimer,
    idle_timer,
    train_windows,
)
from orchestrator.planning.windows import WINDOW_WAITS
from orchestrator.train.requests import acquire_request, domain_input, plan_request
from tests.train_helpers import spec

#: A Monday at midnight: fleet hour h is h o'clock that day.
ANCHOR = datetime(2026, 1, 5, tzinfo=UTC)
#: Open 22:00-04:00 every day.
NIGHTS = Schedule.model_validate({"windows": [{"cron": "0 22 * * *", "duration": "6h"}]})


def test_an_idle_train_looks_at_its_poll_or_sooner_when_the_planner_asks() -> None:
    """The next look is the poll, the planner's retry hour when it comes sooner, and only the
    claim's renewal for a train holding all it may."""
    assert idle_timer(10.0, None, capped=False) == IdleTimer(10.0, 10.0 + POLL_FLEET_HOURS)
    assert idle_timer(10.0, 10.25, capped=False).target == 10.25
    assert idle_timer(10.0, 9.0, capped=False).target == 10.0 + POLL_FLEET_HOURS
    assert idle_timer(10.0, 10.25, capped=True).target == 10.0 + CAPPED_POLL_FLEET_HOURS
    assert idle_timer(10.0, None, capped=False).floor_seconds() == MIN_POLL_SECONDS


def test_outside_its_window_a_train_takes_nothing_and_sleeps_to_the_next_opening() -> None:
    """At 10:00 the night window is shut: the train says why it waits, and its timer runs to
    22:00 (just past it), not to its poll."""
    state = TrainState()
    windows = train_windows(NIGHTS, ANCHOR, state)
    assert windows is not None
    assert not windows.allows(10.0)
    assert state.waiting.startswith(WINDOW_WAITS)
    assert state.next_window_start == datetime(2026, 1, 5, 22, tzinfo=UTC)
    timer = windows.timer(10.0, idle_timer(10.0, None, capped=False))
    assert timer.target == pytest.approx(22.0 + EDGE_PAST_HOURS)
    assert timer.floor_seconds() == EDGE_MIN_SECONDS


def test_inside_its_window_a_train_plans_and_its_claim_lapses_at_the_close() -> None:
    """At 23:00 the window is open until 04:00: the window's waiting text is cleared, the claim
    lapses at the close, and the timer stops at the close only when it comes first."""
    state = TrainState(waiting=WINDOW_WAITS[0])
    windows = train_windows(NIGHTS, ANCHOR, state)
    assert windows is not None
    assert windows.allows(23.0)
    assert state.waiting == ""
    assert windows.closes_hours() == pytest.approx(28.0)
    assert windows.timer(23.0, IdleTimer(23.0, 24.0)) == IdleTimer(23.0, 24.0)
    late = windows.timer(27.5, IdleTimer(27.5, 28.5))
    assert late.target == pytest.approx(28.0 + EDGE_PAST_HOURS)
    assert late.floor_seconds() == EDGE_MIN_SECONDS


def test_a_train_without_a_schedule_has_no_windows() -> None:
    """No schedule: always open, and no window state shown."""
    state = TrainState(window_state="open")
    assert train_windows(None, ANCHOR, state) is None
    assert state.window_state == ""


def test_the_train_asks_the_planner_for_what_its_domains_do_not_hold_yet() -> None:
    """The planner hears the hosts held, the cap, the claim's end and whether the train rests."""
    train = spec(domain_size=4)
    state = TrainState(resting=True, cycle_started_hours=3.0)
    req = plan_request(train, state, ANCHOR, 4, ["h1", "h2"], claim_until_hours=28.0)
    assert (req.max_held, req.in_flight, req.claim_until_hours) == (4, ["h1", "h2"], 28.0)
    assert req.resting and req.cycle_started_hours == 3.0 and req.visit_rule
    assert req.targets == train.targets and req.owner == train.workflow_id


def test_the_arbiter_is_asked_for_a_domain_within_the_maintenance_budget() -> None:
    """The arbiter splits the maintenance budget, never less than one host."""
    train = spec(domain_size=8)
    ask = acquire_request(train, TrainState(), "train-c00", hosts_total=100)
    assert (ask.want, ask.kind, ask.limit) == (8, "train", train.budget.maintenance_limit(100))
    assert acquire_request(train, TrainState(), "train-c00", hosts_total=1).limit >= 1


def test_a_rollout_domain_installs_the_rollout_targets_not_the_trains() -> None:
    """A campaign's rollout gives a domain its own targets; otherwise it takes the train's."""
    train = spec()
    clock = ClockInfo(speed=1.0, anchor_wall=ANCHOR)
    own = domain_input(train, clock, "d1", ["h1"], None, 5.0)
    rollout = domain_input(train, clock, "d2", ["h2"], {"bios": "2.0"}, 5.0)
    assert own.targets == train.targets and own.start_hours == 5.0
    assert rollout.targets == {"bios": "2.0"}
    assert own.max_wait_hours == train.drain.max_wait_hours
