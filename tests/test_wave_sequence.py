"""An operation's wave walked command by command, with no Temporal: the answers are made up here."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.contracts.messages import (
    DrainStatus,
    EvictResult,
    JobWait,
    UpdateResult,
    VerifyOutcome,
    VerifyResult,
)
from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.ops_types import ClusterProgress, TakenWave
from orchestrator.execution.baseline import HealthBaseline
from orchestrator.execution.drain_sequence import Evict, Look, WaitUntil
from orchestrator.execution.wave_pacing import replan
from orchestrator.execution.wave_sequence import (
    AwaitInstall,
    Change,
    CheckHealth,
    HandBackWave,
    Phase,
    Quarantine,
    ReturnHosts,
    Rollback,
    VerifyChange,
    VerifyRollback,
    WaveDone,
    WaveSequence,
)

OLD = {"gpu_driver": "550.54.15", "cuda": "12.4"}
NEW = {"gpu_driver": "560.35.03", "cuda": "12.6"}
HOSTS = [f"c00-z00-r000-h{i:02d}" for i in range(4)]


def spec(**fields: Any) -> OperationSpec:
    return OperationSpec.model_validate({"scope": {"cluster": "c00"}, "targets": NEW, **fields})


def start(s: OperationSpec, hosts: list[str] = HOSTS) -> tuple[WaveSequence, ClusterProgress]:
    wave = TakenWave(fleet_hours=10.0, hosts=hosts, previous={h: OLD for h in hosts})
    p = ClusterProgress(cluster="c00")
    return WaveSequence(wave, s, "op-1", p), p


def step(seq: WaveSequence, expected: object, answer: object = None) -> None:
    """The sequence asks for ``expected`` (a command, or its type); answer it."""
    cmd = seq.next()
    if isinstance(expected, type):
        assert isinstance(cmd, expected), cmd
    else:
        assert cmd == expected
    seq.feed(answer)


def drain_at_once(seq: WaveSequence, hosts: list[str] = HOSTS) -> None:
    step(seq, Phase("draining", ""))
    step(seq, Look, DrainStatus(fleet_hours=10.0, ready=hosts))


def test_a_bad_wave_goes_from_health_check_to_rollback_and_says_why_to_stop():
    """Past max_failures the changed hosts go back to their old versions and the wave stops the
    operation; a host failing its health check is quarantined, never changed or rolled back."""
    seq, p = start(spec(max_failures=0))
    sick, good, bad, broken = HOSTS
    drain_at_once(seq)
    step(seq, Phase("checking"))
    assert seq.next() == CheckHealth(HOSTS, "check 4 hosts before the change")
    seq.feed(HealthBaseline(healthy=[good, bad, broken], unhealthy={sick: "xid 79"}))
    step(seq, Phase("updating"))
    step(seq, Change, UpdateResult(fleet_hours=10.0, updated=[good, bad], failed={broken: "dkms"}))
    step(seq, AwaitInstall(at_hours=10.0, now=10.0))
    step(seq, Phase("verifying"))
    assert seq.next() == VerifyChange([good, bad], "verify the wave's 2 hosts")
    seq.feed(VerifyOutcome(passed=[good], failed={bad: "nccl 40%"}))
    step(seq, Phase("rolling_back"))
    step(seq, Quarantine([broken], "op-1: install failed", f"quarantine {broken}: install failed"))
    cmd = seq.next()
    assert isinstance(cmd, Rollback) and cmd.previous == {good: OLD, bad: OLD}
    seq.feed(UpdateResult(fleet_hours=10.0, updated=[good, bad], duration_hours=0.5))
    step(seq, AwaitInstall(at_hours=10.5, now=10.0))
    cmd = seq.next()
    assert isinstance(cmd, VerifyRollback) and cmd.hosts == [good, bad]
    assert cmd.reason == "op-1: failed after rollback"
    seq.feed(VerifyOutcome(passed=[good, bad]))
    done = seq.next()
    assert isinstance(done, WaveDone)
    assert done.stop.startswith("wave 1: 2 of 4 hosts failed")
    assert "2 failures above max_failures 0; wave rolled back: 2 hosts back" in done.stop
    assert (p.hosts_rolled_back, p.hosts_quarantined, p.hosts_changed) == (2, 2, 0)
    assert (p.waves_done, p.wave_hosts, p.failures) == (0, 0, 2)
    assert seq.view[sick] == ("failed", "xid 79")
    assert seq.view[good][0] == "rolled back"


def test_a_good_wave_returns_its_verified_hosts_and_quarantines_one_flaky_host():
    """Left to the bad-build rule, one failure among ten changed hosts is a bad host: it is
    quarantined with the rule's verdict and the wave returns the other nine."""
    hosts = [f"c00-z00-r000-h{i:02d}" for i in range(10)]
    seq, p = start(spec(), hosts)
    flaky = hosts[3]
    drain_at_once(seq, hosts)
    step(seq, Phase("checking"))
    step(seq, CheckHealth, HealthBaseline(healthy=hosts, base_rate=0.02))
    step(seq, Phase("updating"))
    step(seq, Change, UpdateResult(fleet_hours=10.0, updated=hosts, duration_hours=1.0))
    step(seq, AwaitInstall(at_hours=11.0, now=10.0))
    step(seq, Phase("verifying"))
    passed = [h for h in hosts if h != flaky]
    step(seq, VerifyChange, VerifyOutcome(passed=passed, failed={flaky: "ecc"}))
    assert seq.next() == ReturnHosts(passed, "return 9 verified hosts to service")
    seq.feed(VerifyOutcome(passed=passed))
    cmd = seq.next()
    assert isinstance(cmd, Quarantine) and cmd.hosts == [flaky]
    assert cmd.reason.startswith("op-1: operation check failed (bad hosts, not a bad build")
    seq.feed(VerifyResult(quarantined={flaky: cmd.reason}))
    assert seq.next() == WaveDone("")
    assert (p.hosts_changed, p.hosts_quarantined, p.waves_done, p.wave_hosts) == (9, 1, 1, 0)
    assert (p.gate_changed, p.gate_threshold) == (10, 3)


def test_the_drain_evicts_then_waits_and_an_abort_hands_the_wave_back_untouched():
    """Drain commands pass through with the hosts shown evicting; an abort before the next look
    hands every host of the wave back, changing none."""
    seq, p = start(spec(drain={"max_wait": "0h", "negotiate": False}))
    job = JobWait(job_id=7, hosts=HOSTS[:2], action="evict_now", at_hours=10.0)
    step(seq, Phase("draining", ""))
    step(seq, Look, DrainStatus(fleet_hours=10.0, ready=HOSTS[2:], waits=[job]))
    step(seq, Evict, EvictResult(interrupted=1))
    assert seq.view[HOSTS[0]] == ("evicting", "evicting job 7")
    assert p.jobs_interrupted == 1
    while isinstance(seq.next(), WaitUntil):
        seq.feed()
    assert isinstance(seq.next(), Look)
    seq.abort()
    assert seq.next() == HandBackWave(HOSTS, "abort: hand back the 4 hosts of the wave")
    seq.feed(VerifyResult(returned=HOSTS))
    assert seq.next() == WaveDone("")
    assert (p.wave_hosts, p.hosts_changed, seq.view) == (0, 0, {})


def test_a_drain_for_repair_wave_hands_its_drained_hosts_to_repair():
    """``drain-for-repair`` changes nothing: its drained hosts go to repair, which counts."""
    seq, p = start(spec(kind="drain-for-repair", targets={}))
    drain_at_once(seq)
    step(
        seq,
        Quarantine(HOSTS, "drained for repair by op-1", "hand 4 hosts to repair"),
        VerifyResult(quarantined={h: "repair" for h in HOSTS}),
    )
    assert seq.next() == WaveDone("")
    assert (p.hosts_changed, p.waves_done) == (4, 1)


def test_every_replan_of_waves_total_is_recorded_with_its_reason():
    """The first plan sets the count; each later count that differs re-plans it, saying why."""
    p = ClusterProgress(cluster="c00", granted_hosts=4)
    planned_with = replan(p, 5, None, "c00")
    assert (p.waves_total, planned_with, p.plan_note, p.replans) == (5, 4, "", [])
    p.waves_done = 1
    assert replan(p, 5, planned_with, "c00") == 4 and p.replans == []
    p.hosts_requeued = 8
    replan(p, 6, planned_with, "c00")
    assert p.waves_total == 6
    assert "a job refused to be drained: its 8 hosts went to a later wave" in p.plan_note
    p.granted_hosts = 2
    replan(p, 8, planned_with, "c00")
    assert p.waves_total == 8 and len(p.replans) == 2
    assert "c00's capacity arbiter grants 2 hosts a wave (planned with 4 hosts)" in p.plan_note


def test_a_failed_wave_rolls_back_rollback_batch_hosts_at_a_time():
    """With ``rollback_batch: 2`` the four changed hosts of a failed wave go back two at a time,
    each pair reinstalled, verified and returned before the next is touched."""
    seq, p = start(spec(max_failures=0, rollback_batch=2))
    drain_at_once(seq)
    step(seq, Phase("checking"))
    step(seq, CheckHealth, HealthBaseline(healthy=HOSTS))
    step(seq, Phase("updating"))
    step(seq, Change, UpdateResult(fleet_hours=10.0, updated=HOSTS, duration_hours=1.0))
    step(seq, AwaitInstall(at_hours=11.0, now=10.0))
    step(seq, Phase("verifying"))
    step(seq, VerifyChange, VerifyOutcome(passed=HOSTS[1:], failed={HOSTS[0]: "nccl 40%"}))
    step(seq, Phase("rolling_back"))
    for pair in (HOSTS[:2], HOSTS[2:]):
        cmd = seq.next()
        assert isinstance(cmd, Rollback) and cmd.previous == {h: OLD for h in pair}
        seq.feed(UpdateResult(fleet_hours=11.0, updated=pair, duration_hours=0.5))
        step(seq, AwaitInstall(at_hours=11.5, now=11.0))
        cmd = seq.next()
        assert isinstance(cmd, VerifyRollback) and cmd.hosts == pair
        seq.feed(VerifyOutcome(passed=pair))
        assert all(seq.view[h][0] == "rolled back" for h in pair)
    done = seq.next()
    assert isinstance(done, WaveDone) and "wave rolled back: 4 hosts back" in done.stop
    assert (p.hosts_rolled_back, p.hosts_quarantined) == (4, 0)


def test_rollback_batch_is_refused_below_one():
    """``rollback_batch: 0`` is refused, naming the field."""
    with pytest.raises(ValidationError, match="rollback_batch"):
        spec(rollback_batch=0)


def test_a_failed_batch_at_failure_threshold_stops_the_operation():
    """``failure_threshold: 1``: a wave under ``success_threshold`` ends with why to stop."""
    seq, p = start(spec(max_failures=1000, batch={"start": 2, "failure_threshold": 1}))
    p.hosts_in_scope = 100  # 2 of 100 done: below safety_limit
    drain_at_once(seq)
    step(seq, Phase("checking"))
    step(seq, CheckHealth, HealthBaseline(healthy=HOSTS))
    step(seq, Phase("updating"))
    step(seq, Change, UpdateResult(fleet_hours=10.0, updated=HOSTS, duration_hours=1.0))
    step(seq, AwaitInstall(at_hours=11.0, now=10.0))
    step(seq, Phase("verifying"))
    failed = {h: "nccl 40%" for h in HOSTS[2:]}
    step(seq, VerifyChange, VerifyOutcome(passed=HOSTS[:2], failed=failed))
    step(seq, ReturnHosts, VerifyOutcome(passed=HOSTS[:2]))
    step(seq, Quarantine, VerifyResult(quarantined=failed))
    done = seq.next()
    assert isinstance(done, WaveDone) and "1 failed batches in a row" in done.stop, done
    assert (p.batch_sizes, p.batch_size) == ([2], 2)
