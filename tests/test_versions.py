"""Bad versions known fleet-wide, the version skew window, and blame (issue 12, items 1, 2, 4).

Through the real CLI and a real fleet (its list of bad versions on SQLite and on PostgreSQL):
a version marked bad is refused as a target by `train start`, `train reconfigure` and `ops
plan`/`ops start` (exit 2 naming the field) until an operator clears it; a target that would put
a fourth os version in service is refused naming ``os`` and the versions, and accepted with
``supersedes``. Blame is a pure ranking: tested on the issue's two staggered campaigns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.cli.train import check_spec_against_fleet
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.store_url import STORE_ENV
from orchestrator.planning.blame import HostOutcome, rank_blame
from tests.train_helpers import make_fleet

BAD = "6.12.0-bad"


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1])


def write(path: Path, doc: dict[str, Any]) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_bad_version_is_refused_everywhere_until_cleared(
    tmp_home: Path, store_where: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fleet's list of bad versions, kept in its store (SQLite or PostgreSQL)."""
    SqliteFleet.create(store_where, get_preset("small"), 5, 3600.0).close()
    monkeypatch.setenv(STORE_ENV, str(store_where))
    train = write(tmp_home / "t.json", {"cluster": "c00", "targets": {"os": BAD}})
    op = write(
        tmp_home / "o.json",
        {"kind": "lower-layer", "scope": {"cluster": "c00"}, "targets": {"os": BAD}},
    )
    code, marked = cli("versions", "mark", f"os={BAD}", "--reason", "canary: 4/4 hosts failed")
    assert code == 0 and marked["newly_marked"] is True
    code, again = cli("versions", "mark", f"os={BAD}", "--reason", "twice")
    assert code == 0 and again["newly_marked"] is False and again["reason"].startswith("canary")
    code, listed = cli("versions", "list")
    assert code == 0
    [entry] = listed["bad_versions"]
    assert (entry["component"], entry["version"]) == ("os", BAD) and entry["marked_by"]
    for args in (
        ("train", "start", "--spec", train),
        ("train", "reconfigure", "--cluster", "c00", "--target", f"os={BAD}"),
        ("ops", "plan", "--spec", op),
        ("ops", "start", "--spec", op),
    ):
        code, out = cli(*args)
        assert code == 2 and out["field"] == "targets.os", (args, out)
        assert "marked bad" in out["error"] and "canary" in out["error"], out
    code, cleared = cli("versions", "clear", f"os={BAD}", "--reason", "vendor fixed it")
    assert code == 0 and cleared["cleared_reason"] == "vendor fixed it"
    code, out = cli("ops", "plan", "--spec", op)
    assert code == 0, out
    code, listed = cli("versions", "list")
    assert listed["bad_versions"] == []
    code, history = cli("versions", "list", "--all")
    assert len(history["bad_versions"]) == 1
    code, out = cli("versions", "clear", f"os={BAD}", "--reason", "again")
    assert code == 2 and out["field"] == "version", out
    for bad_pair in ("os", "nope=1", "os=6.10 x"):
        code, out = cli("versions", "mark", bad_pair, "--reason", "r")
        assert code == 2 and out["field"] == "version", (bad_pair, out)


def test_a_fourth_os_version_in_service_is_refused_unless_it_supersedes(tmp_home: Path) -> None:
    path = make_fleet(tmp_home, 3600.0)
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:  # three os versions serving: old, rolling, newer
            names = sorted(sim.hosts)
            for name in names[:10]:
                sim.hosts[name].versions = {**sim.hosts[name].versions, "os": "6.8.0-45"}
            for name in names[10:20]:
                sim.hosts[name].versions = {**sim.hosts[name].versions, "os": "6.8.0-50"}
            sim.dirty_hosts.update(names[:20])
    finally:
        fleet.close()
    train = write(tmp_home / "t.json", {"cluster": "c00", "targets": {"os": "6.12.0-9"}})
    code, out = cli("train", "start", "--spec", train)
    assert code == 2 and out["field"] == "targets.os", out
    for version in ("6.8.0-40", "6.8.0-45", "6.8.0-50", "6.12.0-9", "skew window of 3"):
        assert version in out["error"], out
    # Re-targeting the hosts still waiting for an older rollout keeps the window at three.
    spec = TrainSpec.model_validate(
        {"cluster": "c00", "targets": {"os": "6.12.0-9"}, "supersedes": {"os": "6.8.0-50"}}
    )
    assert check_spec_against_fleet(spec) == 128
    # A wider window lets it through; a narrower one refuses even the current three.
    wide = TrainSpec.model_validate(
        {"cluster": "c00", "targets": {"os": "6.12.0-9"}, "skew": {"os": 4}}
    )
    assert check_spec_against_fleet(wide) == 128
    narrow = write(
        tmp_home / "n.json",
        {"cluster": "c00", "targets": {"os": "6.8.0-50"}, "skew": {"os": 2}},
    )
    code, out = cli("train", "start", "--spec", narrow)
    assert code == 2 and out["field"] == "targets.os", out
    code, out = cli(
        "train",
        "start",
        "--spec",
        write(tmp_home / "x.json", {"cluster": "c00", "skew": {"cuda": 2}}),
    )
    assert code == 2 and out["field"].startswith("skew"), out


def _hosts(n: int, versions: dict[str, str], passed: bool, tag: str) -> list[HostOutcome]:
    return [HostOutcome(f"{tag}{i:03d}", dict(versions), passed) for i in range(n)]


def test_blame_names_the_bad_bios_not_the_good_nic_firmware() -> None:
    """The issue's two staggered campaigns: a good NIC firmware has reached half of the hosts,
    then a bad BIOS starts; hosts visited after both are pending get both. Only the BIOS fails."""
    base = {"os": "6.8.0-40", "bios": "3.1", "nic_firmware": "28.39.1002", "cuda": "12.4"}
    nic = {**base, "nic_firmware": "28.41.1000"}
    both = {**nic, "bios": "3.3-bad"}
    outcomes = (
        _hosts(40, nic, True, "n")  # NIC only: fine
        + _hosts(18, both, False, "b")  # both: the BIOS breaks them
        + _hosts(2, both, True, "p")  # both, and lucky
        + _hosts(3, base, False, "f")  # flaky hosts on nothing new
        + _hosts(60, base, True, "o")
    )
    flights = {"nic-28-41": {"nic_firmware": "28.41.1000"}, "bios-3-3": {"bios": "3.3-bad"}}
    blame = rank_blame(outcomes, flights)
    top = blame[0]
    assert (top.component, top.version, top.campaign) == ("bios", "3.3-bad", "bios-3-3")
    assert (top.failing, top.passing) == (18, 2) and top.score > 0.8
    nic_blame = next(
        b for b in blame if b.component == "nic_firmware" and b.version == "28.41.1000"
    )
    assert nic_blame.campaign == "nic-28-41" and nic_blame.score < top.score - 0.3
    assert all(b.component != "os" and b.component != "cuda" for b in blame)  # background
    assert rank_blame(_hosts(5, nic, True, "x"), flights) == []  # nothing failed: no blame


def test_a_train_holds_while_its_target_is_marked_bad(tmp_home: Path) -> None:
    """The train's plan step (the real activity on the real fleet) takes and records nothing
    while a target is marked bad, says why, and takes hosts again once it is cleared."""
    from datetime import UTC, datetime

    from temporalio.testing import ActivityEnvironment

    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.models import CapacityBudget
    from orchestrator.contracts.train_types import PlanDomainRequest
    from orchestrator.fleet.bad_versions import clear_bad, mark_bad
    from tests.train_helpers import TARGETS

    path = make_fleet(tmp_home, 3600.0)
    acts = FleetActivities(path)
    env = ActivityEnvironment()

    def plan() -> Any:
        return env.run(
            acts.plan_domain,
            PlanDomainRequest(
                cluster="c00",
                owner="train-c00",
                wall=datetime.now(UTC),
                cycle_started_hours=0.0,
                max_held=8,
                budget=CapacityBudget(max_unavailable="10%"),
                max_wait_hours=4.0,
                targets=TARGETS,
            ),
        )

    fleet = SqliteFleet(path)
    try:
        mark_bad(fleet, "os", TARGETS["os"], "test: a bad kernel", "test")
        before = sum(1 for _ in fleet.events())
        held = plan()
        assert held.hosts == [] and held.waiting.startswith("held:"), held
        assert f"os={TARGETS['os']}" in held.waiting and held.counts.hosts_total == 128
        assert sum(1 for _ in fleet.events()) == before  # nothing cordoned, nothing recorded
        assert "os" not in fleet.peek("c00").state.targets  # repair would not spread it
        clear_bad(fleet, "os", TARGETS["os"], "test: fixed", "test")
        going = plan()
        assert len(going.hosts) == 8 and not going.waiting, going
    finally:
        fleet.close()
