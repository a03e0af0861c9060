"""Two limits (the floor and the maintenance budget), failure piggybacking, the visit-cycle target
and fleet-wide simulation (issue 13), on the simulated fleet the live train uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import REGISTRY

from orchestrator.app.cli import main as cli_main
from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS, PIGGYBACK_NOTE
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.models import CapacityBudget, HostState
from orchestrator.execution.cycle import project_cycle_end
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim, Event
from orchestrator.fleet.presets import PRESETS
from orchestrator.simulator import SimConfig
from orchestrator.simulator.budget import sim_budget
from orchestrator.simulator.engine import Engine
from orchestrator.simulator.fleet_sim import simulate_fleet
from orchestrator.telemetry import metrics
from tests.rule_tests import promtool_rule_test

ROOT = Path(__file__).resolve().parent.parent
S = HostState


class RecordingEngine(Engine):
    """The simulator, keeping the fleet's event record it would otherwise drop once read."""

    def __init__(self, sim: ClusterSim, cfg: SimConfig) -> None:
        self.record: list[Event] = []
        self.initial = {n: (h.state, h.owner) for n, h in sim.hosts.items()}
        super().__init__(sim, cfg)

    def _absorb(self) -> None:
        self.record.extend(self.sim.events)
        super()._absorb()


def _run(
    budget: CapacityBudget, failure_scale: float, monkeypatch: pytest.MonkeyPatch, seed: int = 3
) -> RecordingEngine:
    # A harsher fleet than the calibrated one, so failures spill past the failure buffer.
    monkeypatch.setattr(dyn, "FAILURES_PER_GPU_HOUR", dyn.FAILURES_PER_GPU_HOUR * failure_scale)
    cfg = SimConfig(
        preset=PRESETS["small"], budget=budget, seed=seed, days=20, halt_after_failures=1000
    )
    eng = RecordingEngine(build_cluster(cfg.preset, seed), cfg)
    eng.run()
    return eng


def _replay(eng: RecordingEngine, floor: int, maintenance: int) -> dict[str, int]:
    """Replay the event record: count cordons made while the floor or the budget was full."""
    state = dict(eng.initial)
    seen = {"cordons": 0, "refused_floor": 0, "refused_budget": 0, "max_failed": 0}
    for ev in eng.record:
        if ev.kind != "host_state" or ev.host is None:
            continue
        after = str(ev.detail["after"])
        if after == S.CORDONED:
            out = sum(s != S.IN_SERVICE for s, _ in state.values())
            planned = sum(
                s in HELD_STATES and o not in NOT_MAINTENANCE_OWNERS for s, o in state.values()
            )
            seen["cordons"] += 1
            seen["refused_floor"] += out + 1 > floor
            seen["refused_budget"] += planned + 1 > maintenance
        owner = state[ev.host][1]
        if after == S.CORDONED:
            owner = str(ev.detail.get("owner") or owner)
        elif after in (S.IN_REPAIR, S.QUARANTINED, S.IN_SERVICE):
            owner = {"in_repair": "repair", "quarantined": "quarantine"}.get(after, "")
        state[ev.host] = (after, owner)
        failed = sum(s in (S.IN_REPAIR, S.QUARANTINED) for s, _ in state.values())
        seen["max_failed"] = max(seen["max_failed"], failed)
    return seen


def test_no_cordon_is_recorded_while_the_floor_or_the_budget_is_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replaying the event record of a campaign whose failures spill past the failure buffer
    finds no cordon made while hosts out (any reason) or hosts in planned work were at a limit."""
    budget = CapacityBudget(max_unavailable=6, maintenance=4)
    eng = _run(budget, 6.0, monkeypatch)
    seen = _replay(eng, floor=6, maintenance=4)
    assert seen["max_failed"] > 2, "failures must exceed the 2-host buffer for this to test it"
    assert seen["cordons"] > 100
    assert seen["refused_floor"] == 0
    assert seen["refused_budget"] == 0
    res = eng._result(0.0)
    assert res.budget_violations == 0
    assert res.budget_hosts == 4 and res.max_unavailable_hosts == 6


def test_piggybacked_hosts_are_visited_with_no_interruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Due hosts freed by a failure or a job's end are cordoned for the train before any job is
    placed on them, idle, and are visited; none of their jobs was interrupted by maintenance."""
    # Seed 2: failures and job ends free due hosts while the train has room (jobs steered to
    # visited hosts leave most due hosts idle, so few are left for piggybacking on most seeds).
    eng = _run(CapacityBudget(max_unavailable=16, maintenance=12), 10.0, monkeypatch, seed=2)
    taken = [
        ev
        for ev in eng.record
        if ev.kind == "host_state"
        and ev.detail.get("after") == S.CORDONED
        and ev.detail.get("piggyback")
    ]
    res = eng._result(0.0)
    assert taken, "the campaign met failures and job ends while the train had room"
    assert res.piggybacked_hosts == len(taken)
    assert all(PIGGYBACK_NOTE in str(ev.detail.get("reason")) for ev in taken)
    names = {str(ev.host) for ev in taken}
    assert names <= eng.tally.visited | eng.tally.quarantined
    # Each was idle when taken: no job ran on it, so its maintenance interrupted nothing. A
    # job a maintenance eviction stopped never ran on a host while it was piggybacked (a host
    # piggybacked, visited and returned may run a later job, stopped for its other hosts).
    taken_at: dict[str, list[float]] = {}
    for t in taken:
        taken_at.setdefault(str(t.host), []).append(t.t)
    running: dict[int, tuple[float, set[str]]] = {}
    for ev in eng.record:
        if ev.kind == "job_start":
            running[int(ev.detail["job"])] = (ev.t, set(ev.detail["hosts"]))
        elif ev.kind == "job_interrupted" and str(ev.detail.get("cause")).startswith(
            "maintenance:"
        ):
            start, hosts = running.get(int(ev.detail["job"]), (ev.t, set()))
            for h in hosts & names:
                assert not any(start <= tp < ev.t for tp in taken_at[h]), (h, ev)
        elif ev.kind in ("job_end", "job_interrupted"):
            running.pop(int(ev.detail["job"]), None)
    assert res.budget_violations == 0


def test_cycle_projected_past_its_target_raises_the_alert_metric() -> None:
    """10 of 100 hosts in 20 h projects a 200 h cycle: off track for 7d, on track for 10d."""
    counts = CycleCounts(hosts_total=100, visited=8, quarantined=1, in_repair=1, fleet_hours=30)
    end, on_track = project_cycle_end(counts, 10.0, 168.0)
    assert end == pytest.approx(210.0) and on_track is False
    metrics.record_cycle("cap-test", counts, 10.0, 168.0)
    assert REGISTRY.get_sample_value("trainctl_cycle_off_track", {"cluster": "cap-test"}) == 1
    assert REGISTRY.get_sample_value(
        "trainctl_cycle_projected_hours", {"cluster": "cap-test"}
    ) == pytest.approx(200.0)
    metrics.record_cycle("cap-test", counts, 10.0, 240.0)
    assert REGISTRY.get_sample_value("trainctl_cycle_off_track", {"cluster": "cap-test"}) == 0
    assert project_cycle_end(CycleCounts(hosts_total=100, fleet_hours=5), 0.0, 1.0) == (None, None)


def test_off_track_alert_rule_fires_in_promtool(tmp_path: Path) -> None:
    """promtool's rule test: an hour of trainctl_cycle_off_track == 1 fires VisitCycleOffTrack."""
    summary = (
        "c00: the visit cycle is projected to end past its cycle_target (the train already "
        "evicts sooner while behind); raise the maintenance budget or the domain size, or look "
        "at what the train waits for"
    )
    promtool_rule_test(
        tmp_path,
        [
            {
                "interval": "5m",
                "input_series": [
                    {"series": 'trainctl_cycle_off_track{cluster="c00"}', "values": "1x30"},
                    {"series": 'trainctl_cycle_off_track{cluster="c01"}', "values": "0x30"},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "90m",
                        "alertname": "VisitCycleOffTrack",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "warning", "cluster": "c00"},
                                "exp_annotations": {"summary": summary},
                            }
                        ],
                    }
                ],
            }
        ],
    )


def test_simulate_reports_both_limits_and_piggybacking() -> None:
    """``simulate --json`` on small carries the issue's keys; --budget is the maintenance
    budget and the floor defaults to 2 points above it."""
    res = CliRunner().invoke(
        cli_main, ["simulate", "--preset", "small", "--budget", "5%", "--json"]
    )
    assert res.exit_code == 0, res.output
    o: dict[str, Any] = json.loads(res.output)
    for key in (
        "makespan_hours",
        "lower_bound_hours",
        "maintenance_work_host_hours",
        "budget_hosts",
        "max_unavailable_hosts",
        "piggybacked_hosts",
        "job_interruptions",
        "lost_gpu_hours",
        "budget_violations",
        "hosts_visited",
        "hosts_quarantined",
        "hosts_total",
        "visit_interval_hours",
    ):
        assert key in o, key
    assert (o["budget_hosts"], o["max_unavailable_hosts"]) == (6, 8)  # 5% and 7% of 128
    assert o["lower_bound_hours"] == pytest.approx(
        o["maintenance_work_host_hours"] / o["budget_hosts"], rel=1e-3
    )
    bad = CliRunner().invoke(
        cli_main,
        ["simulate", "--preset", "small", "--budget", "5%", "--max-unavailable", "2", "--json"],
    )
    assert bad.exit_code == 2 and "max_unavailable" in json.loads(bad.stdout)["error"]


def test_fleet_wide_simulation_reports_each_cluster_and_totals() -> None:
    """A multi-cluster preset simulates every cluster; totals add them up."""
    cfg = SimConfig(
        preset=PRESETS["multi"],
        budget=sim_budget("5%", None, PRESETS["multi"].hosts_per_cluster),
        days=20,
        halt_after_failures=1000,
    )
    o = simulate_fleet(cfg, workers=1)
    names = [row["cluster"] for row in o["clusters"]]
    assert names == ["c00", "c01", "c02", "c03"]
    t = o["totals"]
    assert t["hosts_total"] == 256
    assert t["hosts_visited"] == sum(row["hosts_visited"] for row in o["clusters"])
    assert t["job_interruptions"] == sum(row["job_interruptions"] for row in o["clusters"])
    assert t["complete"] and t["hosts_visited"] + t["hosts_quarantined"] == 256
    assert t["makespan_hours"] == max(row["makespan_hours"] for row in o["clusters"])
    # Equal clusters: the fleet's utilisation is the mean of theirs.
    mean = sum(row["utilisation"] for row in o["clusters"]) / 4
    assert 0.0 < t["utilisation"] < 1.0 and t["utilisation"] == pytest.approx(mean, abs=1e-3)
