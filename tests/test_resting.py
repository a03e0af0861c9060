"""The visit rule: hosts with nothing pending are checked, never drained; a train on target
rests."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.app.cli.train import print_status
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.models import CapacityBudget, HostState
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainState
from orchestrator.contracts.views import HostView
from orchestrator.execution.take import take_domain
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import get_preset
from orchestrator.planning.resting import VisitRule, checkable, rest_until, wants_visit
from orchestrator.planning.rollout import RolloutScope
from orchestrator.train.status import train_status
from orchestrator.train.ui import train_details

ON = {"os": "6.8.0-40", "bios": "3.1", "nic_firmware": "28.39.1002"}
BUDGET = CapacityBudget(max_unavailable=8)


def _host(name: str, versions: dict[str, str], **kw: object) -> HostView:
    return HostView(name, "r0", "z0", HostState.IN_SERVICE, versions=versions, due=True, **kw)


def test_a_host_on_target_is_checked_and_one_behind_is_not() -> None:
    """Versions are text: 6.10 is not 6.1, so that host still needs its visit."""
    rule = VisitRule({"os": "6.10"})
    hosts = [_host("a", {"os": "6.10"}), _host("b", {"os": "6.1"})]
    assert checkable(hosts, rule, 0.0) == ["a"]
    assert wants_visit(hosts, rule, 0.0)
    assert not wants_visit(hosts[:1], rule, 0.0)


def test_held_busy_or_visited_hosts_are_not_checked() -> None:
    """Only hosts due this cycle, serving and held by nobody are checked in place."""
    rule = VisitRule(ON)
    hosts = [
        _host("due", ON),
        dataclasses.replace(_host("held", ON), owner="ops-x"),
        dataclasses.replace(_host("repair", ON), state=HostState.IN_REPAIR),
        dataclasses.replace(_host("visited", ON), due=False),
    ]
    assert checkable(hosts, rule, 0.0) == ["due"]


def test_a_rollout_the_host_lacks_needs_a_visit() -> None:
    """A campaign's rollout covering a host makes its targets the host's own."""
    canary = RolloutScope.of({"os": "6.8.0-50"}, ["a"], only=False)
    rule = VisitRule(ON, [canary])
    hosts = [_host("a", ON), _host("b", ON)]
    assert checkable(hosts, rule, 0.0) == ["b"]
    assert rule.targets_of("a")["os"] == "6.8.0-50" and rule.targets_of("b") == ON


def test_health_visits_fall_due_after_verify_every() -> None:
    """With verify_every a host on target needs a drained visit once its last boot is that old;
    the rest lasts until the first one falls due (a host whose boot is unknown is due now)."""
    rule = VisitRule(ON, verify_every_hours=100.0)
    booted = [_host("a", ON, last_boot=10.0), _host("b", ON, last_boot=50.0)]
    assert not wants_visit(booted, rule, 109.0) and wants_visit(booted, rule, 110.0)
    assert rest_until(booted, rule) == 110.0
    assert wants_visit([_host("c", ON)], rule, 0.0)
    assert rest_until(booted, VisitRule(ON)) is None


def test_verify_every_is_refused_unless_a_positive_duration() -> None:
    """A bad verify_every names the field; none means no health visits."""
    for bad in ("0d", "-1h", "soon"):
        try:
            TrainSpec.model_validate({"cluster": "c00", "verify_every": bad})
        except ValueError as err:
            assert "verify_every" in str(err)
        else:
            raise AssertionError(f"verify_every {bad!r} accepted")
    assert TrainSpec.model_validate({"cluster": "c00", "verify_every": "30d"}).verify_every_hours
    assert TrainSpec.model_validate({"cluster": "c00"}).verify_every_hours is None


def test_take_domain_checks_in_place_and_rests_on_target() -> None:
    """On a cluster on its targets the plan cordons nothing and records every serving host as
    checked; resting afterwards it takes nothing; a new target ends the rest with a new cycle
    that takes only hosts needing the install."""
    sim = build_cluster(get_preset("small"), 5)
    rule = VisitRule(ON)
    first = take_domain(sim, "train-c00", BUDGET, 0.0, 8, 4.0, "job-aware", rule=rule)
    serving = [n for n in sim.order if sim.hosts[n].state == HostState.IN_SERVICE]
    assert not first.hosts and sorted(first.checked) == sorted(serving)
    assert sim.out_of_service_count() == len(sim.order) - len(serving)
    assert first.counts.due == 0 and first.counts.in_flight == 0
    assert [e.kind for e in sim.events].count("checked") == len(serving)
    resting = take_domain(
        sim, "train-c00", BUDGET, 0.0, 8, 4.0, "job-aware", rule=rule, resting=True
    )
    assert resting.resting and not resting.hosts and resting.cycle_started_hours is None
    assert "resting" in resting.waiting
    sim.advance(1.0)
    sim.hosts[serving[0]].versions = {**ON, "os": "6.8.0-39"}  # an hour on, one host drifts
    woken = take_domain(sim, "train-c00", BUDGET, 0.0, 8, 4.0, "job-aware", rule=rule, resting=True)
    assert not woken.resting and woken.cycle_started_hours is not None
    assert woken.hosts == [serving[0]]
    assert sorted(woken.checked) == sorted(serving[1:])


def test_a_resting_train_says_so_and_is_on_track(capsys: pytest.CaptureFixture[str]) -> None:
    """Status, the train page and the CLI say resting; a resting train far past its cycle
    target's hours is on track (no alert), since no host waits for a visit."""
    spec = TrainSpec.model_validate({"cluster": "c00", "targets": ON, "cycle_target": "7d"})
    counts = CycleCounts(hosts_total=128, fleet_hours=900.0, visited=128)
    st = TrainState(cycles_completed=1, counts=counts, resting=True, checked_total=128)
    status = train_status(spec, st, held=0)
    assert status.resting and status.cycle_on_track is True
    assert status.cycle_projected_end_hours is None
    page = train_details(spec, st, {}, 12, None)
    assert page.startswith("**Resting**") and "checked in place" in page
    running = train_status(spec, st.model_copy(update={"resting": False}), held=0)
    assert running.cycle_on_track is False  # the same figures while a cycle runs: off track
    print_status(status.model_dump())
    assert capsys.readouterr().out.startswith("train-c00: resting")
