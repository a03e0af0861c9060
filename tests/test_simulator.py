"""The discrete-event simulator against hand-computable campaigns, and its contract with the train.

Hand-computable cases switch off the fleet's two sources of chance (unexpected failures and
update outcomes) on a copy of the ``small`` preset (128 hosts) with no job trace; every host then
needs ``os`` + ``bios`` + ``nic_firmware``: 0.5 + 0.35 + 0.2 install, 0.25 reboot and 0.5 verify,
1.8 fleet hours.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.contracts.models import CapacityBudget
from orchestrator.execution.cycle import POLL_FLEET_HOURS
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.cluster_sim import ClusterSim, JobRec
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.fleet.sqlite_fleet import SqliteFleet
from orchestrator.planning import train_plan
from orchestrator.simulator import (
    SimConfig,
    build_cluster,
    lower_bound_after_outages_hours,
    lower_bound_hours,
    simulate,
)
from orchestrator.simulator.engine import maintenance_work_hours

VISIT_HOURS = 1.8
from orchestrator.contracts.train_spec import POLICIES  # noqa: E402


@pytest.fixture
def no_chance(monkeypatch: pytest.MonkeyPatch) -> None:
    """No unexpected failures and every install succeeds cleanly."""
    monkeypatch.setattr(dyn, "next_failure_gap", lambda *a, **k: float("inf"))
    monkeypatch.setattr(
        dyn, "draw_update_outcome", lambda *a, **k: dyn.UpdateOutcome(True, False, None, None)
    )


def idle_small() -> SimConfig:
    return SimConfig(preset=get_preset("small").model_copy(update={"target_utilisation": 0.0}))


def with_one_job(cfg: SimConfig, hours: float) -> ClusterSim:
    """A cluster whose every host runs one job of ``hours`` that started (and checkpointed) at 0."""
    sim = build_cluster(cfg.preset, cfg.seed)
    assert not sim.jobs
    job = JobRec(0, len(sim.order), hours, 1.0, 0.0, list(sim.order), 0.0, "d", "c", "running")
    sim.jobs[0] = job
    sim.state.job_seq = 1
    for name in sim.order:
        sim.hosts[name].job_id = 0
    return sim


@pytest.mark.parametrize("policy", POLICIES)
def test_no_jobs_makespan_is_the_lower_bound(no_chance: None, policy: str) -> None:
    """With no jobs and hosts dividing evenly into rounds, every policy meets the bound exactly."""
    cfg = idle_small()
    cfg.policy, cfg.budget = policy, CapacityBudget(max_unavailable=16)
    res = simulate(cfg)
    assert res.complete and res.hosts_visited == 128
    assert res.lower_bound_hours == pytest.approx(128 * VISIT_HOURS / 16)
    # Tolerance: only float rounding of summed fleet hours (8 rounds of 1.8 h).
    assert res.makespan_hours == pytest.approx(res.lower_bound_hours, abs=1e-6)
    assert res.job_interruptions == 0 and res.lost_gpu_hours == 0


def test_no_jobs_uneven_rounds_stay_within_one_visit(no_chance: None) -> None:
    """When hosts do not divide into rounds, the makespan exceeds the bound by under one visit."""
    cfg = idle_small()
    cfg.budget = CapacityBudget(max_unavailable="3%")  # 3 hosts: 43 rounds, the last of 2 hosts
    res = simulate(cfg)
    assert res.makespan_hours is not None
    assert res.makespan_hours == pytest.approx(43 * VISIT_HOURS, abs=1e-6)
    assert res.lower_bound_hours <= res.makespan_hours < res.lower_bound_hours + VISIT_HOURS


@pytest.mark.parametrize(
    ("policy", "interruptions"),
    [
        # Every batch of 16 evicts the job; it restarts whenever the batch gives its hosts back.
        ("rolling-serial", 8),
        # Each batch waits the 4 h deadline, then evicts; same restarts.
        ("drain-wait", 8),
        # It checkpointed at its (re)start, so each batch evicts it at once with nothing lost.
        ("job-aware", 8),
        # Waits for the job's end, which lies beyond the horizon: nothing visited, nothing killed.
        ("slurm-asap", 0),
    ],
)
def test_one_long_job_spanning_the_cluster(
    no_chance: None, policy: str, interruptions: int
) -> None:
    """A job on all 128 hosts that outlives the run is interrupted once per batch of 16."""
    cfg = idle_small()
    cfg.policy, cfg.budget, cfg.days = policy, CapacityBudget(max_unavailable=16), 3.0
    res = simulate(cfg, with_one_job(cfg, 1000.0))
    assert res.job_interruptions == interruptions
    assert res.complete == (policy != "slurm-asap")
    # slurm-asap never stops it: every host runs it all along. The others stop it for each
    # batch the instant it restarts on the batch before's hosts: it never runs, and
    # utilisation says so.
    assert res.utilisation == pytest.approx(1.0 if policy == "slurm-asap" else 0.0, abs=1e-9)
    if policy == "job-aware":
        assert res.lost_gpu_hours == pytest.approx(0.0, abs=1.0)
        assert res.makespan_hours == pytest.approx(8 * VISIT_HOURS, abs=1e-6)


@pytest.mark.parametrize(
    ("policy", "interruptions"),
    [("rolling-serial", 8), ("drain-wait", 0), ("job-aware", 0), ("slurm-asap", 0)],
)
def test_one_short_job_spanning_the_cluster(
    no_chance: None, policy: str, interruptions: int
) -> None:
    """A job on all hosts that ends in 2 h is waited for by all but rolling-serial."""
    cfg = idle_small()
    cfg.policy, cfg.budget = policy, CapacityBudget(max_unavailable=16)
    res = simulate(cfg, with_one_job(cfg, 2.0))
    assert res.job_interruptions == interruptions
    assert res.complete and res.hosts_visited == 128
    if interruptions == 0:
        assert res.makespan_hours == pytest.approx(2.0 + 8 * VISIT_HOURS, abs=1e-6)


@pytest.mark.parametrize(
    ("failure", "quarantined_at"),
    [
        # The install fails for good at fleet hour 0: repair reimages it with the recorded
        # targets before it serves again.
        ("install", 0.0),
        # The install leaves a GPU defect that verification finds at 1.8 h: repair fixes it.
        ("verify", VISIT_HOURS),
    ],
)
def test_quarantined_host_back_from_repair_is_visited_within_the_cycle(
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
    quarantined_at: float,
) -> None:
    """Quarantine is not a visit. One host fails its first visit and is quarantined, triaged for
    8 h and repaired for ``r`` h; repair gives it back in service on every recorded target
    (reimaged and verified), and the train's next look (when a domain ends or at its poll, so
    within ``POLL_FLEET_HOURS``) finds it due with nothing pending: it is checked in place, not
    drained again, and the cycle counts it as visited.

    With a budget of 4 the other 127 hosts go 3 at a time while it is away, so the cycle outlasts
    its repair. Its outage (1 host of the budget from quarantine until repair gives it back) is
    the only one, so the bound after outages is the work over ``4 - outage / makespan`` hosts.
    """
    monkeypatch.setattr(dyn, "next_failure_gap", lambda *a, **k: float("inf"))
    cfg = idle_small()
    cfg.budget = CapacityBudget(max_unavailable=4)
    sim = build_cluster(cfg.preset, cfg.seed)
    bad = sim.order[0]

    def outcome(seed: int, host: str, key: str, comps: list[str]) -> dyn.UpdateOutcome:
        if host == bad and key.startswith("0:"):  # its first install attempt
            if failure == "install":
                return dyn.UpdateOutcome(False, True, "os", None)
            return dyn.UpdateOutcome(True, False, None, "xid_errors")
        return dyn.UpdateOutcome(True, False, None, None)

    monkeypatch.setattr(dyn, "draw_update_outcome", outcome)
    # The repair time ClusterSim draws for it (one install attempt made so far).
    r = dyn.rng(cfg.seed, bad, "quarantine-repair", 1).uniform(12.0, 48.0)
    res = simulate(cfg, sim)
    assert res.complete and res.budget_violations == 0
    back = quarantined_at + 8.0 + r
    visit = sim.hosts[bad].last_visit
    assert visit is not None
    assert back - 1e-9 <= visit <= back + POLL_FLEET_HOURS + 1e-9
    booted = sim.hosts[bad].last_boot  # a drained visit would reboot it after ``back``
    assert booted is None or booted <= back + 1e-9
    assert all(sim.hosts[bad].versions[c] == v for c, v in cfg.targets.items())
    assert (res.hosts_visited, res.hosts_quarantined) == (128, 0)
    assert res.makespan_hours is not None and res.makespan_hours > visit
    outage = (back - quarantined_at) / res.makespan_hours
    assert res.outage_budget_hosts_mean == pytest.approx(outage, rel=1e-9)
    work = 128 * VISIT_HOURS  # counted at the start: the revisit is extra work on top
    assert res.lower_bound_hours == pytest.approx(work / 4)
    assert res.lower_bound_after_outages_hours == pytest.approx(work / (4 - outage), rel=1e-9)
    assert res.to_json()["makespan_over_lower_bound_after_outages"] == pytest.approx(
        res.makespan_hours / res.lower_bound_after_outages_hours, abs=1e-4
    )


def test_lower_bound_after_outages_takes_the_outages_out_of_the_budget() -> None:
    """The issue's bound divides by min(domain, budget); the bound after outages by
    min(domain, budget - mean outage), so it is the issue's bound when nothing else is out,
    and a small domain that the outages leave room for is not slowed by them."""
    assert lower_bound_after_outages_hours(900.0, 92, 92, 0.0) == lower_bound_hours(900.0, 92, 92)
    assert lower_bound_after_outages_hours(900.0, 92, 92, 2.0) == pytest.approx(10.0)
    assert lower_bound_after_outages_hours(900.0, 10, 92, 30.0) == pytest.approx(90.0)
    assert lower_bound_after_outages_hours(900.0, 92, 92, 92.0) == pytest.approx(900.0)


def test_work_and_bound_of_the_campaign(no_chance: None) -> None:
    """Every host of ``small`` needs 1.8 h of maintenance; the bound divides by the budget."""
    cfg = idle_small()
    sim = build_cluster(cfg.preset, cfg.seed)
    assert maintenance_work_hours(sim, cfg.targets) == pytest.approx(128 * VISIT_HOURS)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_job_aware_never_exceeds_the_budget(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Every cordon the job-aware train makes leaves the cluster within its budget."""
    cfg = SimConfig(preset=get_preset("small"), seed=seed, budget=CapacityBudget(max_unavailable=8))
    cordon = ClusterSim.cordon
    worst: list[int] = []

    def checked(self: ClusterSim, name: str, *args: object, **kwargs: object) -> bool:
        ok = cordon(self, name, *args, **kwargs)  # type: ignore[arg-type]
        if ok:
            worst.append(len(self.out_of_service()))
        return ok

    monkeypatch.setattr(ClusterSim, "cordon", checked)
    res = simulate(cfg)
    assert res.complete and res.hosts_visited + res.hosts_quarantined == res.hosts_total
    assert res.budget_violations == 0
    assert worst and max(worst) <= 8


def test_simulator_calls_the_trains_planning_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator looks the planner up on ``train_plan`` at call time, as the train does."""
    calls = {"choose_domain": 0, "drain_step": 0}
    real_choose, real_drain = train_plan.choose_domain, train_plan.drain_step

    def choose(*args: object, **kwargs: object) -> train_plan.DomainPlan:
        calls["choose_domain"] += 1
        return real_choose(*args, **kwargs)  # type: ignore[arg-type]

    def drain(*args: object, **kwargs: object) -> train_plan.DrainStep:
        calls["drain_step"] += 1
        return real_drain(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("orchestrator.planning.train_plan.choose_domain", choose)
    monkeypatch.setattr("orchestrator.planning.train_plan.drain_step", drain)
    res = simulate(SimConfig(preset=get_preset("small"), budget=CapacityBudget(max_unavailable=8)))
    assert calls["choose_domain"] == res.planner_calls > 0
    assert calls["drain_step"] > 0


def test_simulated_cluster_is_built_like_the_sqlite_fleet(tmp_path: Path) -> None:
    """The in-memory cluster has the hosts, versions and jobs ``fleet init`` would store."""
    preset = get_preset("small")
    fleet = SqliteFleet.create(tmp_path / "fleet.db", preset, 7, MAX_SPEED)
    try:
        stored = fleet.peek("c00", fleet.anchor_wall)  # at its first instant, as built
    finally:
        fleet.close()
    sim = build_cluster(preset, 7)
    assert sim.order == stored.order
    assert {n: (h.zone, h.rack, h.versions, h.job_id) for n, h in sim.hosts.items()} == {
        n: (h.zone, h.rack, h.versions, h.job_id) for n, h in stored.hosts.items()
    }
    assert {j.id: (j.hosts, j.start, j.work_hours) for j in sim.jobs.values()} == {
        j.id: (j.hosts, j.start, j.work_hours) for j in stored.jobs.values()
    }


def test_unknown_policy_exits_2_naming_the_field() -> None:
    """``trainctl simulate --policy nope`` is bad input: exit 2, message names ``policy``."""
    res = CliRunner().invoke(main, ["simulate", "--preset", "small", "--policy", "nope"])
    assert res.exit_code == 2
    assert "policy" in res.output


def test_cli_json_and_sweep_plot(tmp_path: Path) -> None:
    """One JSON object per run; a sweep prints one row per setting and writes a PNG."""
    runner = CliRunner()
    res = runner.invoke(
        main, ["simulate", "--preset", "small", "--budget", "8", "--json", "--series"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for key in (
        "hosts_total",
        "hosts_visited",
        "hosts_quarantined",
        "makespan_hours",
        "lower_bound_hours",
        "lower_bound_after_outages_hours",
        "makespan_over_lower_bound",
        "makespan_over_lower_bound_after_outages",
        "job_interruptions",
        "lost_gpu_hours",
        "budget_violations",
        "wall_seconds",
        "series",
    ):
        assert key in out
    png = tmp_path / "sweep.png"
    res = runner.invoke(
        main,
        ["simulate", "--preset", "small", "--sweep", "domain-size=2,4", "--plot", str(png)]
        + ["--json"],
    )
    assert res.exit_code == 0, res.output
    sweep = json.loads(res.output)
    assert [r["domain_size"] for r in sweep["runs"]] == [2, 4]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- the planner's choices, by hand
def _host(
    i: int, job: int | None, state: str = "in_service", owner: str = ""
) -> train_plan.HostView:
    return train_plan.HostView(f"h{i:02d}", f"r{i // 4}", "z0", state, owner, job, True)


def _job(jid: int, hosts: list[int], end: float, next_ckpt: float) -> train_plan.JobView:
    return train_plan.JobView(
        jid, len(hosts), tuple(f"h{i:02d}" for i in hosts), end, next_ckpt, next_ckpt - 1.0
    )


def test_job_aware_evicts_the_largest_job_when_none_can_fill_the_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two hosts in flight, eight free slots, ``EVICT_MIN_FILL`` at one half. First, due hosts in
    jobs of 3 and 2 hosts, far from their end: ``need`` is half of what is left (5 hosts: 3),
    which the job of 3 fills, so it goes now and the job of 2 waits for slots to gather. Then
    three jobs of 2 hosts: half of what is left (6 hosts: 3) is more than any of them will ever
    have, so gathering would hold the budget idle for nothing: each is worth an eviction."""
    monkeypatch.setattr(train_plan, "EVICT_MIN_FILL", 0.5)
    held = [_host(i, None, "in_maintenance", "train") for i in range(2)]
    budget = train_plan.BudgetView(limit=10)
    due = [_host(2, 1), _host(3, 1), _host(4, 1), _host(5, 2), _host(6, 2)]
    jobs = {1: _job(1, [2, 3, 4], 50.0, 10.5), 2: _job(2, [5, 6], 50.0, 10.2)}
    plan = train_plan.choose_domain([*held, *due], jobs, 10.0, budget, 8, 4.0)
    assert plan.hosts == ["h02", "h03", "h04"]
    assert plan.waiting == "gathering slots for a job worth evicting"
    due = [_host(i, 1 + (i - 2) // 2) for i in range(2, 8)]
    jobs = {j: _job(j, [2 * j, 2 * j + 1], 50.0, 10.2) for j in (1, 2, 3)}
    plan = train_plan.choose_domain([*held, *due], jobs, 10.0, budget, 8, 4.0)
    assert sorted(plan.hosts) == [f"h{i:02d}" for i in range(2, 8)]


def test_job_aware_prefers_the_job_whose_hosts_come_free_soonest() -> None:
    """Nothing in flight; two jobs cover the same slots. One checkpoints first (in 0.05 h) but
    ends in 2 h, so ``drain_step`` would wait for its end and hold its hosts 2 h; the other
    checkpoints in 0.1 h and is evicted then: take the latter."""
    due = [_host(i, 1) for i in range(4)] + [_host(i, 2) for i in range(4, 8)]
    jobs = {1: _job(1, [0, 1, 2, 3], 12.0, 10.05), 2: _job(2, [4, 5, 6, 7], 90.0, 10.1)}
    assert train_plan.drain_step(jobs[1], 10.0, 14.0).action == "wait_end"
    plan = train_plan.choose_domain(due, jobs, 10.0, train_plan.BudgetView(limit=4), 4, 4.0)
    assert plan.hosts == ["h04", "h05", "h06", "h07"]
    assert plan.retry_at_hours == pytest.approx(12.0 - train_plan.END_WAIT_HOURS)
    step = train_plan.drain_step(jobs[2], 10.0, 14.0)
    assert step.action == "evict_after_checkpoint"
    assert step.at_hours == pytest.approx(10.1 + train_plan.CHECKPOINT_SLACK_HOURS)
