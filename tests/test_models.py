"""Domain-model validation: bad values fail with a message naming the field."""

from __future__ import annotations

import pydantic
import pytest

from orchestrator.app.cli.common import describe_validation_error
from orchestrator.contracts.models import (
    CapacityBudget,
    Update,
    check_targets,
    parse_duration_hours,
)
from orchestrator.contracts.views import JobView, last_checkpoint, next_checkpoint


@pytest.mark.parametrize("bad", ["150%", "0%", 0, "abc", -3, "-5%", 2.5, True])
def test_budget_rejects_bad_max_unavailable(bad: object) -> None:
    """A budget over 100%, under one host, or not a count or percentage fails naming the field."""
    with pytest.raises(pydantic.ValidationError) as info:
        CapacityBudget.model_validate({"max_unavailable": bad})
    errors = info.value.errors()
    assert [e["loc"] for e in errors] == [("max_unavailable",)]
    assert "max_unavailable" in str(errors[0]["msg"])
    assert describe_validation_error(info.value).startswith("max_unavailable")


@pytest.mark.parametrize("field", ["per_rack", "per_zone"])
def test_budget_rejects_per_domain_limit_below_one(field: str) -> None:
    """A per-rack or per-zone limit of zero hosts is refused, naming that field."""
    with pytest.raises(pydantic.ValidationError) as info:
        CapacityBudget.model_validate({field: 0})
    assert [e["loc"] for e in info.value.errors()] == [(field,)]


def test_budget_rejects_unknown_field() -> None:
    """A misspelt budget key is an error rather than silently ignored."""
    with pytest.raises(pydantic.ValidationError) as info:
        CapacityBudget.model_validate({"max_unavialable": "3%"})
    assert "max_unavialable" in describe_validation_error(info.value)


@pytest.mark.parametrize(
    ("value", "hosts", "limit"),
    [
        ("3%", 3072, 92),
        ("3%", 128, 3),
        ("0.5%", 128, 0),
        ("0.79%", 128, 1),
        ("10%", 30, 3),
        ("100%", 128, 128),
        (8, 128, 8),
    ],
)
def test_budget_limit_in_hosts(value: object, hosts: int, limit: int) -> None:
    """A valid budget turns into a host count: the exact floor of the percentage, maybe 0."""
    assert CapacityBudget.model_validate({"max_unavailable": value}).limit(hosts) == limit


def test_require_hosts_refuses_a_budget_of_no_host() -> None:
    """require_hosts returns the limit, or refuses a budget allowing no host naming the field."""
    assert CapacityBudget(max_unavailable="3%").require_hosts(128) == 3
    with pytest.raises(ValueError, match=r"^budget\.max_unavailable: 0\.5% of 128 hosts"):
        CapacityBudget(max_unavailable="0.5%").require_hosts(128)
    with pytest.raises(ValueError, match=r"^window\.max_unavailable: "):
        CapacityBudget(max_unavailable="0.5%").require_hosts(128, field="window.max_unavailable")


def test_budget_count_is_capped_at_cluster_size() -> None:
    """A count budget larger than the cluster allows the whole cluster and no more."""
    assert CapacityBudget(max_unavailable="500").limit(128) == 128


@pytest.mark.parametrize("bad", [-1, -0.5, "-2h", "-30m", "-1d"])
def test_parse_duration_rejects_negatives(bad: object) -> None:
    """Negative durations are refused with a message naming the field."""
    with pytest.raises(ValueError, match=r"^max_wait: .*negative"):
        parse_duration_hours(bad, "max_wait")


@pytest.mark.parametrize("bad", ["soon", "4 hours", "", True, "4h30m"])
def test_parse_duration_rejects_garbage(bad: object) -> None:
    """Text that is not a duration is refused with a message naming the field."""
    with pytest.raises(ValueError, match=r"^max_wait: "):
        parse_duration_hours(bad, "max_wait")


@pytest.mark.parametrize(
    ("text", "hours"),
    [("4h", 4.0), ("30m", 0.5), ("2d", 48.0), ("90s", 0.025), ("1w", 168.0), (3, 3.0), ("0", 0.0)],
)
def test_parse_duration_units(text: object, hours: float) -> None:
    """Durations in seconds, minutes, hours, days and weeks all come back in hours."""
    assert parse_duration_hours(text, "max_wait") == pytest.approx(hours)


@pytest.mark.parametrize("component", ["cuda", "gpu_driver"])
def test_check_targets_refuses_upper_layer_for_trains(component: str) -> None:
    """A train may not change cuda or gpu_driver: the message names the component and says why."""
    with pytest.raises(ValueError) as info:
        check_targets({"os": "6.8.0-45", component: "999"}, allow_upper=False)
    message = str(info.value)
    assert message.startswith(f"{component}:")
    assert "bulk operation" in message


def test_check_targets_accepts_upper_layer_for_bulk_operations() -> None:
    """A bulk operation may change cuda and gpu_driver; versions come back as strings."""
    assert check_targets({"cuda": "12.10", "gpu_driver": 560}, allow_upper=True) == {
        "cuda": "12.10",
        "gpu_driver": "560",
    }


@pytest.mark.parametrize("bad", [12.1, True, None, ["12"]])
def test_check_targets_refuses_versions_that_are_not_text(bad: object) -> None:
    """A float (digits already lost), boolean, null or list version is refused, naming it."""
    with pytest.raises(ValueError, match=r"^cuda: version must"):
        check_targets({"cuda": bad}, allow_upper=True)


@pytest.mark.parametrize(
    ("targets", "named"),
    [({"kernal": "6.8"}, "kernal"), ({"bios": "3 2"}, "bios"), ({"bmc": ""}, "bmc")],
)
def test_check_targets_names_bad_component_or_version(
    targets: dict[str, object], named: str
) -> None:
    """An unknown component or a malformed version is refused, naming the component."""
    with pytest.raises(ValueError, match=rf"^{named}:"):
        check_targets(targets, allow_upper=True)


def test_lower_layer_refused_where_only_upper_allowed() -> None:
    """An operation limited to gpu_driver/cuda refuses a lower-layer component, naming it."""
    with pytest.raises(ValueError, match=r"^bios:"):
        check_targets({"bios": "3.2"}, allow_upper=True, allow_lower=False)


def test_update_and_job_validate_their_fields() -> None:
    """Negative update durations, bad targets and non-positive job durations name their field."""
    with pytest.raises(pydantic.ValidationError) as info:
        Update.model_validate({"component": "bios", "target": "3.2", "duration_hours": -1})
    assert info.value.errors()[0]["loc"] == ("duration_hours",)
    with pytest.raises(pydantic.ValidationError) as info:
        Update.model_validate({"component": "bios", "target": "bad version!", "duration_hours": 1})
    assert info.value.errors()[0]["loc"] == ("target",)
    with pytest.raises(pydantic.ValidationError) as info:
        Update.model_validate({"component": "firmware", "target": "1", "duration_hours": 1})
    assert info.value.errors()[0]["loc"] == ("component",)


def test_job_checkpoints() -> None:
    """A job's last and next checkpoints fall on its checkpoint interval from its start, and
    never past its end (the one definition the fleet, the planners and the views use)."""
    assert last_checkpoint(10, 2, 15.5, end=30) == 14
    assert next_checkpoint(10, 2, 15.5, end=30) == 16
    assert last_checkpoint(10, 2, 5, end=30) == 10
    assert next_checkpoint(10, 2, 29.5, end=29.7) == 29.7
    job = JobView(1, 1, ("h",), 30.0, 16.0, 14.0)
    later = job.at(21.0)
    assert later is not None and (later.last_checkpoint_hours, later.next_checkpoint_hours) == (
        20.0,
        22.0,
    )
    assert job.at(30.0) is None
