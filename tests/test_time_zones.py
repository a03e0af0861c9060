"""Windows and blackouts in a named time zone: the right UTC instants across both daylight-saving
changes, status in the zone and in UTC, Schedules in the zone, unknown zones refused."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from orchestrator.app.cli.train import print_status
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainState
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.planning.windows import window_state
from orchestrator.train.status import train_status
from tests.test_hardening_input import EXAMPLES, offline, refused, run  # noqa: F401
from tests.test_hardening_train import answer, cli
from tests.train_helpers import make_fleet

PACIFIC = Schedule.model_validate(
    {"time_zone": "America/Los_Angeles", "windows": [{"cron": "0 2 * * *", "duration": "3h"}]}
)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (a UTC instant inside the night's window, when it opened, when it closes), around 2026's
# changes: Sunday 8 March (PST -8 to PDT -7, 02:00 skipped) and Sunday 1 November (back to PST).
NIGHTS = [
    ("2026-03-07T11:00", "2026-03-07T10:00", "2026-03-07T13:00"),  # PST: 02:00-05:00 = 10-13 UTC
    ("2026-03-08T11:00", "2026-03-08T10:00", "2026-03-08T13:00"),  # 02:00 skipped: 03:00 PDT
    ("2026-03-09T10:00", "2026-03-09T09:00", "2026-03-09T12:00"),  # PDT: 02:00-05:00 = 09-12 UTC
    ("2026-10-31T10:00", "2026-10-31T09:00", "2026-10-31T12:00"),  # PDT
    ("2026-11-01T11:00", "2026-11-01T10:00", "2026-11-01T13:00"),  # 02:00 PST, after 01:00 twice
    ("2026-11-02T11:00", "2026-11-02T10:00", "2026-11-02T13:00"),  # PST
]


@pytest.mark.parametrize(("inside", "opened", "closes"), NIGHTS)
def test_a_pacific_window_opens_and_closes_at_the_right_utc_instants(
    inside: str, opened: str, closes: str
) -> None:
    """02:00-05:00 Pacific is open at the right UTC instants each night around both changes,
    closes when it should, and the instant before it opened was outside it."""
    ws = window_state(PACIFIC, utc(inside))
    assert ws.open and ws.closes_at == utc(closes), ws
    assert window_state(PACIFIC, utc(opened)).open  # the opening instant is inside
    before = window_state(PACIFIC, utc(opened) - timedelta(minutes=1))
    assert not before.open and before.next_start == utc(opened), before
    assert not window_state(PACIFIC, utc(closes)).open


def test_a_blackout_without_offset_is_local_time_and_one_with_an_offset_is_that_instant() -> None:
    """``from: 2026-12-24T00:00`` in Pacific time is 08:00 UTC; ``Z`` times stay as written."""
    s = Schedule.model_validate(
        {
            "time_zone": "America/Los_Angeles",
            "blackouts": [
                {"from": "2026-12-24T00:00:00", "to": "2026-12-26T00:00:00"},
                {"from": "2026-07-04T00:00:00Z", "to": "2026-07-05T00:00:00Z"},
            ],
        }
    )
    assert [(b.start, b.end) for b in s.blackouts] == [
        (utc("2026-12-24T08:00"), utc("2026-12-26T08:00")),
        (utc("2026-07-04T00:00"), utc("2026-07-05T00:00")),
    ]
    assert window_state(s, utc("2026-12-24T07:59")).open
    assert window_state(s, utc("2026-12-24T08:00")).state == "blackout"


def test_status_prints_the_window_in_its_zone_and_in_utc(capsys: pytest.CaptureFixture) -> None:
    """A waiting train's status line names the next opening in Pacific time and in UTC."""
    example = yaml.safe_load((EXAMPLES / "train.yaml").read_text())
    spec = TrainSpec.model_validate(
        example | {"schedule": PACIFIC.model_dump(mode="json", by_alias=True)}
    )
    ws = window_state(PACIFIC, utc("2026-11-01T20:00"))
    st = TrainState(window_state=ws.state, next_window_start=ws.next_start)
    print_status(train_status(spec, st).model_dump(mode="json"))
    out = capsys.readouterr().out
    assert "next opens 2026-11-02 02:00 PST (2026-11-02 10:00 UTC)" in out, out


def test_an_unknown_zone_is_refused_naming_time_zone(tmp_home: Path, offline: None) -> None:  # noqa: F811
    """`train start` with ``time_zone: Mars/Olympus`` exits 2 naming schedule.time_zone."""
    assert run("fleet", "init", "--preset", "small").exit_code == 0
    spec = tmp_home / "tz.yaml"
    spec.write_text(
        (EXAMPLES / "train.yaml").read_text()
        + 'schedule:\n  time_zone: Mars/Olympus\n  windows: [{cron: "0 2 * * *", duration: 3h}]\n'
    )
    err = refused(run("train", "start", "--spec", str(spec), "--json"), "schedule.time_zone")
    assert "Mars/Olympus" in err["error"] and "IANA" in err["error"]


async def test_a_recurring_campaign_schedule_reads_its_cron_in_the_spec_zone(
    dev_env, tmp_home, tmp_path
) -> None:
    """`campaign start --cron "0 4 * * *"` with a Pacific schedule makes a Temporal Schedule in
    that zone: its next runs fall at 04:00 Pacific (11:00 or 12:00 UTC)."""
    make_fleet(tmp_home, MAX_SPEED)
    name = f"tz-{uuid.uuid4().hex[:6]}"
    spec_file = tmp_path / "campaign.json"
    spec_file.write_text(
        json.dumps(
            {
                "name": name,
                "targets": {"bmc": "2.18.1"},
                "stages": [{"name": "all", "clusters": ["c00"]}],
                "schedule": PACIFIC.model_dump(mode="json", by_alias=True),
            }
        )
    )
    made = answer(
        await cli(dev_env, "campaign", "start", "--spec", str(spec_file), "--cron", "0 4 * * *"), 0
    )
    try:
        assert made["time_zone"] == "America/Los_Angeles", made
        hours = {datetime.fromisoformat(t).astimezone(UTC).hour for t in made["next_runs"]}
        assert hours <= {11, 12} and hours, made["next_runs"]
    finally:
        answer(await cli(dev_env, "schedule", "delete", "--id", made["schedule_id"]), 0)
