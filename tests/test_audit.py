"""The audit over real event logs: a clean maintenance log passes, each broken invariant is found.

Logs are made by real ``ClusterSim`` operations on a real fleet, each test once on SQLite and
once on PostgreSQL (``store_where``): the ledger is one for both stores. To break an invariant
the tests reach for the simulator's internals (``_set_state``, ``_place``), standing in for a
buggy train or scheduler; the audit must catch it from the log alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.audit.record_checks import AuditReport, audit
from orchestrator.contracts.models import HostState as S
from orchestrator.fleet import SqliteFleet, fleet_path
from orchestrator.fleet.cluster_sim import ClusterSim, JobRec
from orchestrator.fleet.presets import INITIAL_VERSIONS, PRESETS

ANCHOR = datetime(2025, 1, 1, tzinfo=UTC)
OWNER = "train-c00"
LOWER = {"os": "6.8.0-45", "bios": "3.2"}
UPPER = (INITIAL_VERSIONS["gpu_driver"], INITIAL_VERSIONS["cuda"])


def at(hours: float) -> datetime:
    return ANCHOR + timedelta(hours=hours)


@pytest.fixture
def fleet(store_where: Path | str) -> Iterator[SqliteFleet]:
    """A fresh small fleet (128 hosts, speed 1.0, so wall ``at(h)`` is fleet hour h), on each
    store (``store_where``): the ledger writes the same record on SQLite and PostgreSQL."""
    fleet = SqliteFleet.create(store_where, PRESETS["small"], 2, 1.0, wall=ANCHOR)
    try:
        yield fleet
    finally:
        fleet.close()


def idle(sim: ClusterSim, name: str) -> None:
    """Evict whatever job runs on ``name``, as a drain deadline would."""
    job = sim.job_of(name)
    if job is not None:
        sim.evict(job.id, OWNER)


def update(sim: ClusterSim, name: str, targets: dict[str, str]) -> None:
    """Install ``targets`` on a held host, retrying transient failures; the seed makes it stick."""
    assert sim.begin_update(name, OWNER)
    for attempt in range(5):
        out = sim.apply_updates(name, targets, OWNER, str(attempt))
        if out.ok:
            return
    raise AssertionError(f"update of {name} kept failing")


def visit(sim: ClusterSim, name: str, targets: dict[str, str], limit: int) -> bool:
    """A whole maintenance visit: cordon, drain, update, verify, return (or quarantine)."""
    if not sim.cordon(name, OWNER, OWNER, limit, per_rack=8):
        return False
    idle(sim, name)
    if not sim.begin_update(name, OWNER):
        return False
    for attempt in range(3):
        out = sim.apply_updates(name, targets, OWNER, str(attempt))
        if out.ok or out.permanent:
            break
    ok = out.ok and sim.verify(name, targets, OWNER)[0]
    if not (ok and sim.return_to_service(name, OWNER)):
        sim.quarantine(name, OWNER, "visit failed")
    return True


def fail_one(sim: ClusterSim, repair_hours: float) -> str:
    """Fail a host through the real failure path, with its repair cut to ``repair_hours``."""
    down = {h.name for h in sim.hosts.values() if h.state == S.IN_REPAIR}
    while True:
        sim._failure()  # a thinned draw (host already down) fails nobody: draw again
        new = [h for h in sim.hosts.values() if h.state == S.IN_REPAIR and h.name not in down]
        if new:
            new[0].repair_until = sim.now + repair_hours
            return new[0].name


def kinds(report: AuditReport) -> list[str]:
    return [v.kind for v in report.violations]


def test_clean_maintenance_log_passes(fleet: SqliteFleet) -> None:
    """A month of jobs and failures plus a full train visit, repairs and a release audits clean."""
    with fleet.cluster("c00", at(1)) as sim:
        sim.set_targets(LOWER, OWNER)
        broken = fail_one(sim, 1.0)  # repaired mid-train: repair reimages it with the targets
    with fleet.cluster("c00", at(2.5)) as sim:
        back = sim.hosts[broken]
        assert back.state == S.IN_SERVICE and back.owner == ""
        assert all(back.versions[c] == v for c, v in LOWER.items())
        racks = sorted({h.rack for h in sim.hosts.values()})
    visited = 0
    for i, rack in enumerate(racks):
        with fleet.cluster("c00", at(3 + 2 * i)) as sim:
            for name in sim.rack_hosts(rack):
                visited += visit(sim, name, LOWER, limit=12)
    assert visited >= 120
    with fleet.cluster("c00", at(40)) as sim:
        spare = next(h.name for h in sim.hosts.values() if h.state == S.IN_SERVICE)
        assert sim.cordon(spare, OWNER, OWNER, limit=12)
        sim.release(spare, OWNER)  # a cancelled visit hands the host back untouched
        sim.close_owner(OWNER, OWNER)
        sim.set_targets({"nic_firmware": "28.41.1000"}, "train-c00-next")  # not started yet
        late = fail_one(sim, 1.0)  # repaired after the train closed: serves on every target
    with fleet.cluster("c00", at(30 * 24)) as sim:
        wanted = {**LOWER, "nic_firmware": "28.41.1000"}
        if sim.hosts[late].state == S.IN_SERVICE:  # (it may have failed again in a month)
            assert all(sim.hosts[late].versions[c] == v for c, v in wanted.items())
        assert sim.hosts[late].owner in ("", "repair", "quarantine")
    report = audit(fleet)
    assert report.ok, report.violations[:5]
    assert report.events_checked == len(list(fleet.events())) > 1000
    assert audit(fleet, "c00") == report


@pytest.mark.audit_violations("budget_exceeded")
def test_budget_exceeded_is_found(fleet: SqliteFleet) -> None:
    """Cordons past the cluster, per-rack or per-zone limit are reported; reaching it is fine."""
    with fleet.cluster("c00", at(1)) as sim:
        for name in ("c00-z00-r000-h00", "c00-z00-r001-h00", "c00-z01-r000-h00"):
            assert sim.cordon(name, OWNER, OWNER, limit=3)  # exactly at the limit: fine
        assert audit(fleet).ok

        def rogue(name: str, **budget: int) -> None:
            # A train that trusted a stale count: the change lands without the budget check.
            h = sim.hosts[name]
            sim._set_state(h, S.CORDONED, "rogue", "maintenance by rogue", owner="rogue", **budget)

        rogue("c00-z01-r005-h01", limit=3)
        rogue("c00-z00-r000-h01", limit=100, per_rack=1)
        rogue("c00-z01-r006-h00", limit=100, per_zone=2)
    report = audit(fleet)
    found = [(v.kind, v.host) for v in report.violations]
    assert found == [
        ("budget_exceeded", "c00-z01-r005-h01"),
        ("budget_exceeded", "c00-z00-r000-h01"),
        ("budget_exceeded", "c00-z01-r006-h00"),
    ]
    details = [v.detail for v in report.violations]
    assert "4 hosts" in details[0] and "cluster c00" in details[0]
    assert "rack c00-z00-r000" in details[1]
    assert "zone c00-z01" in details[2]


@pytest.mark.audit_violations("mixed_versions")
def test_mixed_versions_at_job_start_is_found(fleet: SqliteFleet) -> None:
    """A job placed across cuda versions is reported, even when its own event claims one version."""
    a, b = "c00-z00-r003-h00", "c00-z00-r003-h01"
    with fleet.cluster("c00", at(1)) as sim:
        for name in (a, b):
            assert sim.cordon(name, "ops-cuda", "ops-cuda", limit=10)
            idle(sim, name)
        update(sim, a, {"cuda": "12.6"})
        assert sim.verify(a, {"cuda": "12.6"}, OWNER)[0]
        assert sim.return_to_service(a, OWNER)
        sim.release(b, "ops-cuda")
        job = sim.jobs[10_000] = JobRec(10_000, 2, 5.0, 1.0, sim.now)
        sim._place(job, UPPER, [{"c00-z00-r003": [a, b]}])  # a scheduler bug
    report = audit(fleet)
    assert kinds(report) == ["mixed_versions"]
    assert "job 10000" in report.violations[0].detail
    assert "12.4" in report.violations[0].detail and "12.6" in report.violations[0].detail


@pytest.mark.audit_violations("mixed_versions")
def test_upper_layer_change_under_a_running_job_is_found(fleet: SqliteFleet) -> None:
    """Changing cuda on a host while its job runs is reported; a lower-layer change is not."""
    with fleet.cluster("c00", at(1)) as sim:
        busy = [h.name for h in sim.hosts.values() if h.job_id is not None]
        sim.apply_updates(busy[0], {"cuda": "12.6"}, "rogue", "0")
        sim.apply_updates(busy[1], {"nic_firmware": "28.41.1000"}, "rogue", "0")
        job = sim.hosts[busy[0]].job_id
    report = audit(fleet)
    assert [(v.kind, v.host) for v in report.violations] == [("mixed_versions", busy[0])]
    assert f"job {job}" in report.violations[0].detail


@pytest.mark.audit_violations("unverified_return")
def test_unverified_returns_are_found(fleet: SqliteFleet) -> None:
    """Returning after an update without a passing verification since is reported, each way."""
    skipped, failed, stale = "c00-z00-r000-h00", "c00-z00-r001-h00", "c00-z00-r002-h00"
    with fleet.cluster("c00", at(1)) as sim:
        for name in (skipped, failed, stale):
            assert sim.cordon(name, OWNER, OWNER, limit=10)
            idle(sim, name)
            update(sim, name, LOWER)
        # Verification skipped; the event even claims verified=True.
        h = sim.hosts[skipped]
        sim._set_state(h, S.IN_SERVICE, OWNER, "returned after verification", verified=True)
        # Verification failed (wrong manifest), returned anyway.
        assert not sim.verify(failed, {"os": "6.8.0-99"}, OWNER)[0]
        sim._set_state(sim.hosts[failed], S.IN_SERVICE, OWNER, "returned")
        # Verified, then updated again, then returned on the old verification.
        assert sim.verify(stale, LOWER, OWNER)[0]
        sim.apply_updates(stale, {"bmc": "1.9.0"}, OWNER, "late")
        assert sim.return_to_service(stale, OWNER)
    report = audit(fleet)
    assert [(v.kind, v.host) for v in report.violations] == [
        ("unverified_return", skipped),
        ("unverified_return", failed),
        ("unverified_return", stale),
    ]


def test_returns_that_need_no_verification_pass(fleet: SqliteFleet) -> None:
    """A host released untouched, and one back from repair, return without a verification."""
    with fleet.cluster("c00", at(1)) as sim:
        assert sim.cordon("c00-z00-r000-h00", OWNER, OWNER, limit=10)
        sim.start_drain("c00-z00-r000-h00", OWNER)
        sim.release("c00-z00-r000-h00", OWNER)
        broken = fail_one(sim, 1.0)
    with fleet.cluster("c00", at(3)) as sim:
        assert sim.hosts[broken].state == S.IN_SERVICE
    assert audit(fleet).ok


@pytest.mark.audit_violations("host_lost")
def test_lost_hosts_are_found(fleet: SqliteFleet) -> None:
    """Hosts left out of service by a closed owner, or by nobody, are lost; open holds are not."""
    closed, ownerless, open_hold, reopened = (
        "c00-z00-r000-h00",
        "c00-z00-r001-h00",
        "c00-z00-r002-h00",
        "c00-z00-r003-h00",
    )
    with fleet.cluster("c00", at(1)) as sim:
        assert sim.cordon(closed, "ops-1", "ops-1", limit=10)
        sim.close_owner("ops-1", "ops-1")  # closed without handing its host back
        sim._set_state(sim.hosts[ownerless], S.DRAINING, "someone", "drained by hand")
        assert sim.cordon(open_hold, OWNER, OWNER, limit=10)
        sim.close_owner("ops-2", "ops-2")
        assert sim.cordon(reopened, "ops-2", "ops-2", limit=10)  # a new hold after the close
        sim.quarantine("c00-z00-r004-h00", OWNER, "bad gpu")
    report = audit(fleet)
    assert sorted((v.kind, v.host) for v in report.violations) == [
        ("host_lost", closed),
        ("host_lost", ownerless),
    ]


@pytest.mark.audit_violations("stale_return")
def test_stale_returns_are_found(fleet: SqliteFleet) -> None:
    """A host back from repair without the cluster's recorded targets, and one a train returns
    without the targets it recorded, are stale returns; a host the train never visited is not."""
    repaired, visited, untouched = "c00-z00-r000-h00", "c00-z00-r001-h00", "c00-z00-r002-h00"
    with fleet.cluster("c00", at(1)) as sim:
        sim.set_targets(LOWER, OWNER)
        # A buggy repair pipeline: straight back to service, not reimaged.
        sim._set_state(sim.hosts[repaired], S.IN_REPAIR, "fleet", "faulty_gpu")
        sim._set_state(sim.hosts[repaired], S.IN_SERVICE, "repair", "repaired")
        # A buggy train: installs only the BIOS of its targets, verifies that, returns it.
        assert sim.cordon(visited, OWNER, OWNER, limit=10)
        idle(sim, visited)
        update(sim, visited, {"bios": LOWER["bios"]})
        assert sim.verify(visited, {"bios": LOWER["bios"]}, OWNER)[0]
        assert sim.return_to_service(visited, OWNER)
        assert sim.cordon(untouched, OWNER, OWNER, limit=10)
        sim.release(untouched, OWNER)
    report = audit(fleet)
    assert sorted((v.kind, v.host) for v in report.violations) == [
        ("stale_return", repaired),
        ("stale_return", visited),
    ]


@pytest.mark.audit_violations("scope_incomplete")
def test_succeeded_operation_must_leave_its_scope_on_target(fleet: SqliteFleet) -> None:
    """An operation that closes as succeeded with a scope host still on the old CUDA breaks
    the audit; quarantined scope hosts, and the same close as failed, do not."""
    done, left, bad = "c00-z00-r000-h00", "c00-z00-r001-h00", "c00-z00-r002-h00"
    cuda = {"cuda": "12.8"}
    with fleet.cluster("c00", at(1)) as sim:
        sim.record(
            "ops-x", "operation_scope", None, owner="ops-x", targets=cuda, hosts=[done, left, bad]
        )
        for name in (done, bad):
            assert sim.cordon(name, "ops-x", "ops-x", limit=10)
            sim.evict(sim.job_of(name).id, "ops-x") if sim.job_of(name) else None
            assert sim.begin_update(name, "ops-x")
            assert sim.apply_updates(name, cuda, "ops-x", "0").ok
        assert sim.verify(done, cuda, "ops-x")[0] and sim.return_to_service(done, "ops-x")
        sim.quarantine(bad, "ops-x", "check failed")
        sim.close_owner("ops-x", "ops-x", outcome="succeeded")
        sim.record("ops-y", "operation_scope", None, owner="ops-y", targets=cuda, hosts=[left])
        sim.close_owner("ops-y", "ops-y", outcome="failed")
    report = audit(fleet)
    assert [(v.kind, v.host) for v in report.violations] == [("scope_incomplete", left)]


@pytest.mark.audit_violations("host_lost")
def test_audit_cli(tmp_home: Path) -> None:
    """trainctl audit exits 0 when clean, 1 with the violations as JSON, 2 on a bad cluster."""
    runner = CliRunner()
    missing = runner.invoke(main, ["audit", "--json"])
    assert missing.exit_code == 1 and "fleet init" in missing.output
    assert runner.invoke(main, ["fleet", "init", "--preset", "small"]).exit_code == 0
    clean = runner.invoke(main, ["audit", "--json"])
    assert clean.exit_code == 0, clean.output
    out = json.loads(clean.stdout)
    assert out["ok"] is True and out["violations"] == [] and out["events_checked"] > 0
    assert runner.invoke(main, ["audit"]).exit_code == 0

    fleet = SqliteFleet(fleet_path())
    with fleet.cluster("c00") as sim:
        assert sim.cordon("c00-z00-r000-h00", "ops-9", "ops-9", limit=10)
        sim.close_owner("ops-9", "ops-9")
    fleet.close()
    broken = runner.invoke(main, ["audit", "--json", "--cluster", "c00"])
    assert broken.exit_code == 1
    out = json.loads(broken.stdout)
    assert out["ok"] is False
    assert [(v["kind"], v["host"]) for v in out["violations"]] == [
        ("host_lost", "c00-z00-r000-h00")
    ]
    human = runner.invoke(main, ["audit"])
    assert human.exit_code == 1 and "host_lost" in human.stdout

    bad = runner.invoke(main, ["audit", "--cluster", "c42"])
    assert bad.exit_code == 2 and "cluster" in bad.output
