"""Cron evaluation and maintenance windows as pure functions: edges, merges, blackouts, errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from orchestrator.contracts.cron import next_fire, parse_cron, prev_fire
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.planning.windows import window_state


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_cron_next_and_prev_on_weekday_nights():
    """`0 22 * * 1-5` fires at 22:00 Monday to Friday and skips the weekend."""
    cron = parse_cron("0 22 * * 1-5")
    assert next_fire(cron, t("2026-12-04T22:00")) == t("2026-12-04T22:00")  # a Friday
    assert next_fire(cron, t("2026-12-04T22:01")) == t("2026-12-07T22:00")  # Monday
    assert prev_fire(cron, t("2026-12-06T12:00")) == t("2026-12-04T22:00")


def test_cron_fields_steps_names_and_either_day():
    """Steps, names, 7 as Sunday, and day-of-month OR day-of-week as in Vixie cron."""
    assert next_fire(parse_cron("*/15 * * * *"), t("2026-12-01T10:16")) == t("2026-12-01T10:30")
    assert next_fire(parse_cron("0 0 * jan sun"), t("2026-12-01T00:00")) == t("2027-01-03T00:00")
    assert next_fire(parse_cron("0 0 * * 7"), t("2026-12-01T00:00")) == t("2026-12-06T00:00")
    either = parse_cron("0 0 13 * 5")  # the 13th, or any Friday
    assert next_fire(either, t("2026-12-05T00:00")) == t("2026-12-11T00:00")
    assert next_fire(parse_cron("@daily"), t("2026-12-01T00:01")) == t("2026-12-02T00:00")


@pytest.mark.parametrize(
    ("expr", "word"),
    [
        ("0 22 * *", "five"),
        ("61 * * * *", "minute"),
        ("0 0 30 2 *", "never"),
        ("0 0 * * 9", "week"),
    ],
)
def test_cron_errors_say_what(expr, word):
    with pytest.raises(ValueError, match=word):
        parse_cron(expr)


def test_window_open_closes_and_next_start():
    """Inside a window: open until its end; after it: waiting until the next start."""
    sched = Schedule.model_validate({"windows": [{"cron": "0 22 * * 1-5", "duration": "6h"}]})
    inside = window_state(sched, t("2026-12-01T23:30"))  # Tuesday night
    assert inside.open and inside.closes_at == t("2026-12-02T04:00")
    after = window_state(sched, t("2026-12-02T04:00"))
    assert after.state == "waiting" and after.next_start == t("2026-12-02T22:00")
    weekend = window_state(sched, t("2026-12-05T10:00"))
    assert weekend.next_start == t("2026-12-07T22:00")


def test_overlapping_windows_merge():
    """A window opening before the last one closes extends it."""
    sched = Schedule.model_validate({"windows": [{"cron": "0 * * * *", "duration": "90m"}]})
    assert window_state(sched, t("2026-12-01T10:10")).closes_at is None  # always open


def test_blackout_beats_windows_and_cuts_them_short():
    """A blackout closes an open window early, and the next start is after the blackout."""
    sched = Schedule.model_validate(
        {
            "windows": [{"cron": "0 */2 * * *", "duration": "1h"}],
            "blackouts": [{"from": "2026-12-01T10:30:00Z", "to": "2026-12-01T14:15:00"}],
        }
    )
    assert window_state(sched, t("2026-12-01T10:00")).closes_at == t("2026-12-01T10:30")
    during = window_state(sched, t("2026-12-01T12:10"))
    assert during.state == "blackout" and during.next_start == t("2026-12-01T14:15")
    only = Schedule.model_validate({"blackouts": [{"from": "2026-12-24", "to": "2026-12-27"}]})
    assert window_state(only, t("2026-12-01T00:00")).closes_at == t("2026-12-24T00:00")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"windows": [{"cron": "bad", "duration": "1h"}]}, "windows.0.cron"),
        ({"windows": [{"cron": "0 * * * *", "duration": "0h"}]}, "windows.0.duration"),
        ({"blackouts": [{"from": "2026-12-02", "to": "2026-12-01"}]}, "blackouts.0"),
        ({}, "schedule"),
        ({"windows": [{"cron": "0 * * * *", "duration": "1h", "extra": 1}]}, "extra"),
    ],
)
def test_bad_schedules_name_the_field(doc, field):
    with pytest.raises(ValidationError) as err:
        Schedule.model_validate(doc)
    text = str(err.value)
    assert field.split(".")[0] in text
