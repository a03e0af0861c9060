"""``trainctl fleet init|status``: the user-facing contract, exit codes and atomic creation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchestrator.app.cli import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_meta_24k_init_then_status(tmp_home: Path) -> None:
    """meta-24k initialises, and status --json reports 3,072 hosts and 24,576 GPUs, all counted."""
    init = run("fleet", "init", "--preset", "meta-24k", "--seed", "3", "--json")
    assert init.exit_code == 0, init.output
    assert json.loads(init.stdout)["gpus_total"] == 24_576
    assert (tmp_home / "fleet.db").is_file()

    status = run("fleet", "status", "--json")
    assert status.exit_code == 0, status.output
    out = json.loads(status.stdout)
    assert out["hosts_total"] == 3072
    assert out["gpus_total"] == 24_576
    assert out["preset"] == "meta-24k" and out["seed"] == 3
    assert sum(out["states"].values()) == 3072
    assert set(out["versions"]) == {
        "os",
        "bios",
        "bmc",
        "gpu_firmware",
        "nic_firmware",
        "gpu_driver",
        "cuda",
    }
    for component, versions in out["versions"].items():
        assert sum(versions.values()) == 3072, component
    assert out["jobs_running"] > 0 and 0.5 < out["utilisation"] <= 1.0

    one = run("fleet", "status", "--cluster", "c00", "--json")
    assert one.exit_code == 0 and json.loads(one.stdout)["clusters"] == 1


def test_status_human_output(tmp_home: Path) -> None:
    """Without --json, status prints a readable summary naming the preset and host count."""
    assert run("fleet", "init", "--preset", "small").exit_code == 0
    status = run("fleet", "status")
    assert status.exit_code == 0, status.output
    assert "small" in status.stdout and "128 hosts" in status.stdout


def _leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in home.iterdir())


def test_unknown_preset_is_bad_input_and_writes_nothing(tmp_home: Path) -> None:
    """An unknown preset exits 2 with a message naming 'preset', and leaves no file behind."""
    result = run("fleet", "init", "--preset", "meta-1m")
    assert result.exit_code == 2
    assert "preset" in result.output and "meta-1m" in result.output
    assert _leftovers(tmp_home) == []


@pytest.mark.parametrize("speed", ["fast", "0", "-5", "nan", "inf"])
def test_bad_speed_is_bad_input_and_writes_nothing(tmp_home: Path, speed: str) -> None:
    """A speed that is not a positive number or 'max' exits 2 naming speed, writing nothing."""
    result = run("fleet", "init", "--preset", "small", "--speed", speed)
    assert result.exit_code == 2, result.output
    assert "speed" in result.output
    assert _leftovers(tmp_home) == []


def test_speed_max_is_accepted(tmp_home: Path) -> None:
    """--speed max builds a fleet at the fastest scaled speed, which status reports."""
    assert run("fleet", "init", "--preset", "small", "--speed", "max").exit_code == 0
    out = json.loads(run("fleet", "status", "--json").stdout)
    assert out["speed"] == 1e6 and out["fleet_hours"] >= 0


def test_status_without_fleet_fails(tmp_home: Path) -> None:
    """fleet status with no fleet initialised exits 1 and says how to create one."""
    result = run("fleet", "status", "--json")
    assert result.exit_code == 1
    assert "fleet init" in result.output
    error = json.loads(result.stdout)  # the error contract: one JSON object on stdout
    assert error["exit_code"] == 1 and "fleet init" in error["error"]


def test_unknown_cluster_is_bad_input(tmp_home: Path) -> None:
    """fleet status --cluster with a cluster the fleet lacks exits 2 naming 'cluster'."""
    assert run("fleet", "init", "--preset", "small").exit_code == 0
    result = run("fleet", "status", "--cluster", "c07", "--json")
    assert result.exit_code == 2
    assert "cluster" in result.output and "c07" in result.output


def test_init_refuses_to_overwrite_without_force(tmp_home: Path) -> None:
    """A second init keeps the existing fleet unless --force is given."""
    assert run("fleet", "init", "--preset", "small", "--seed", "1").exit_code == 0
    again = run("fleet", "init", "--preset", "small", "--seed", "2")
    assert again.exit_code == 2 and "--force" in again.output
    assert json.loads(run("fleet", "status", "--json").stdout)["seed"] == 1
    forced = run("fleet", "init", "--preset", "small", "--seed", "2", "--force")
    assert forced.exit_code == 0
    assert json.loads(run("fleet", "status", "--json").stdout)["seed"] == 2


def test_meta_600k_init_reports_over_600k_gpus(tmp_home: Path) -> None:
    """meta-600k initialises 25 clusters and at least 600,000 GPUs."""
    result = run("fleet", "init", "--preset", "meta-600k", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["gpus_total"] >= 600_000 and out["clusters"] == 25
    last = run("fleet", "status", "--cluster", "c24", "--json")
    assert last.exit_code == 0 and json.loads(last.stdout)["hosts_total"] == 3072


def test_status_says_the_fleet_clock_runs_on_after_the_last_train_ended(tmp_home: Path) -> None:
    """A fleet hour past the last train's end is not that train's: status says the clock keeps
    running and when the last train ended."""
    from datetime import timedelta

    from orchestrator.fleet import open_fleet

    assert run("fleet", "init", "--preset", "small", "--speed", "3600").exit_code == 0
    fleet = open_fleet()
    try:
        with fleet.cluster("c00", fleet.anchor_wall + timedelta(seconds=0.01)) as b:
            b.close_owner("train-c00", "train-c00")
    finally:
        fleet.close()
    out = json.loads(run("fleet", "status", "--json").stdout)
    ended = out["clock"]["last_train_ended"]
    assert out["clock"]["runs_on"] and ended["train"] == "train-c00"
    assert ended["fleet_hours"] == 0.01 and out["fleet_hours"] >= 0.01
    text = run("fleet", "status").stdout
    assert "the fleet clock keeps running (3600 fleet seconds per wall second)" in text
    assert "the last train to end, train-c00, ended at fleet hour 0.0 (" in text
