"""Quiet hours for jobs: the grammar, the pure rule, and a simulated cycle that keeps them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.contracts.job_comment import parse_job_comment, quiet_hours
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.views import JobView
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.sim_records import JobRec
from orchestrator.planning import quiet
from orchestrator.planning.host_explain import Coverage, HostFacts, explain_host
from orchestrator.simulator.config import SimConfig
from tests.sim_recording import RecordingEngine

ANCHOR = datetime(2026, 12, 20, tzinfo=UTC)
QUIET_HOURS = 10.0


@pytest.fixture
def no_chance(monkeypatch: pytest.MonkeyPatch) -> None:
    """No unexpected failures and every install succeeds cleanly."""
    monkeypatch.setattr(dyn, "next_failure_gap", lambda *a, **k: float("inf"))
    monkeypatch.setattr(
        dyn, "draw_update_outcome", lambda *a, **k: dyn.UpdateOutcome(True, False, None, None)
    )


def test_quiet_until_is_read_as_a_utc_instant_and_a_malformed_one_is_ignored():
    """``quiet_until=`` takes an ISO 8601 UTC instant; a local or unreadable one is ignored."""
    said = parse_job_comment("llm ckpt=1h quiet_until=2026-12-24T00:00Z")
    assert said.quiet_until == datetime(2026, 12, 24, tzinfo=UTC) and not said.ignored
    for bad in (
        "quiet_until=tomorrow",
        "quiet_until=2026-12-24T00:00",
        "quiet_until=2026-12-24T00:00+01:00",
    ):
        said = parse_job_comment(f"ckpt=1h {bad}")
        assert said.quiet_until is None and said.ignored == (bad,) and said.ckpt_hours == 1.0


def test_quiet_hours_are_capped_by_max_quiet_after_the_job_start():
    """A job cannot protect itself for longer than the cluster's ``max_quiet`` after its start."""
    week = ANCHOR + timedelta(days=7)
    assert quiet_hours(week, ANCHOR, 2.0, 24.0) == 26.0
    assert quiet_hours(ANCHOR + timedelta(hours=5), ANCHOR, 2.0, 24.0) == 5.0
    assert quiet_hours(week, None, 2.0, 24.0) is None  # no calendar: nothing to read it against


def test_the_host_deadline_alone_cuts_quiet_hours_short():
    """A drain leaves a quiet job until its quiet hours end, or until its host's deadline."""
    job = JobView(1, 2, ("a", "b"), 100.0, 3.0, 2.0, quiet_until_hours=10.0)
    assert quiet.hold(job, 1.0, None) == quiet.QuietHold(10.0, False)
    assert quiet.hold(job, 1.0, 12.0) == quiet.QuietHold(10.0, False)
    assert quiet.hold(job, 1.0, 6.0) == quiet.QuietHold(6.0, True)
    assert quiet.hold(job, 10.5, 6.0) is None  # its quiet hours are over
    assert quiet.host_deadline([4.0, None], 48.0) == 48.0  # never visited: from fleet hour 0
    assert quiet.host_deadline([4.0, 9.0], None) is None


def _quiet_cluster(cfg: SimConfig) -> ClusterSim:
    """Every host runs one long job, quiet for ``QUIET_HOURS`` from the fleet's start."""
    sim = build_cluster(cfg.preset, cfg.seed)
    sim.anchor_wall = ANCHOR
    job = JobRec(0, len(sim.order), 1000.0, 1.0, 0.0, list(sim.order), 0.0, "d", "c", "running")
    sim.jobs[0] = job
    sim.state.job_seq = 1
    sim.state.job_behaviours["0"] = "go"
    until = (ANCHOR + timedelta(hours=QUIET_HOURS)).strftime("%Y-%m-%dT%H:%MZ")
    sim.state.job_comments["0"] = f"quiet_until={until}"
    for name in sim.order:
        sim.hosts[name].job_id = 0
    return sim


def _cycle(cycle_target_hours: float | None) -> list:
    cfg = SimConfig(preset=get_preset("small").model_copy(update={"target_utilisation": 0.0}))
    cfg.budget, cfg.days = CapacityBudget(max_unavailable=16), 3.0
    cfg.cycle_target_hours = cycle_target_hours
    engine = RecordingEngine(_quiet_cluster(cfg), cfg)
    assert engine.run().complete
    return engine.log


def test_a_simulated_cycle_waits_out_a_quiet_job(no_chance: None):
    """The train's first batch waits past its 4 h drain deadline for the job's quiet hours."""
    log = _cycle(None)
    stops = [e for e in log if e.kind == "job_interrupted" and e.detail["job"] == 0]
    assert stops and stops[0].t >= QUIET_HOURS - 1e-6
    assert not [e for e in log if e.kind == "quiet_job_evicted"]


def test_a_simulated_cycle_evicts_a_quiet_job_at_its_host_deadline_and_says_so(no_chance: None):
    """With ``cycle_target: 6h`` the hosts' deadline (never visited: hour 6) comes first."""
    log = _cycle(6.0)
    stops = [e for e in log if e.kind == "job_interrupted" and e.detail["job"] == 0]
    assert stops and stops[0].t == pytest.approx(6.0, abs=1e-3)
    said = [e for e in log if e.kind == "quiet_job_evicted"]
    assert said and said[0].t == stops[0].t and said[0].detail["quiet_until"] == QUIET_HOURS


def test_fleet_host_names_the_quiet_job_as_the_blocker():
    """A host whose job is in its quiet hours names that job, waiting or being drained."""
    cov = Coverage(recorded={"os": "6.8.0-45"}, setters={"os": ("train-c00", 1.0)})
    job = JobView(7, 16, ("h",), 30.0, 12.0, 10.0, quiet_until_hours=20.0)
    for state, owner in (("in_service", ""), ("draining", "train-c00")):
        host = HostFacts("h", "c00", state, owner, "", {"os": "6.8.0-40"}, 11.0, job=job)
        (answer,) = explain_host(host, cov)
        assert answer.blocked_by is not None and answer.blocked_by.kind == "quiet_job"
        assert answer.blocked_by.until_hours == 20.0 and "job 7" in answer.blocked_by.detail
