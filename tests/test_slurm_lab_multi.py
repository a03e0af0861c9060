"""Two real Slurm labs side by side, and a lab told a build is bad (issue 29, #1 and #3).

A fleet is many clusters, so ``lab slurm up --name NAME`` runs a second real Slurm cluster on
loopback beside the first: its own slurmctld, slurmds, munged, ClusterName and node names.
``--bad-version COMPONENT=VERSION[:RATE]`` makes a fixed share of the nodes that install that
build fail the lab's health check, so a bad build can be rolled out and caught on real Slurm.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.lab.slurm import lab_down, lab_running, lab_versions
from orchestrator.lab.slurm_files import lab_dir

BAD = "6.12.0-bad"


def trainctl(*args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(cli_main, list(args))
    return res.exit_code, json.loads(res.stdout or "{}")


def slurm(conf: str, *args: str) -> str:
    return subprocess.run(
        list(args),
        env={**os.environ, "SLURM_CONF": conf},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


@pytest.fixture
def two_labs(tmp_home: Path) -> Iterator[tuple[dict, dict]]:
    try:
        code_a, a = trainctl("lab", "slurm", "up", "--nodes", "2", "--json")
        assert code_a == 0, a
        code_b, b = trainctl(
            "lab", "slurm", "up", "--name", "b", "--nodes", "2",
            "--bad-version", f"os={BAD}", "--bad-version", "nic_firmware=30.1:0.5", "--json",
        )  # fmt: skip
        assert code_b == 0, b
        yield a, b
    finally:
        lab_down(tmp_home, "b")
        lab_down(tmp_home)


def script(home: Path, name: str, which: str, *args: str) -> int:
    return subprocess.run(
        [str(lab_dir(home, name) / which), *args], capture_output=True, timeout=30
    ).returncode


def install(home: Path, name: str, node: str, component: str, version: str) -> bool:
    """Run the lab's install hook, then its health check: whether the node is healthy."""
    assert script(home, name, "hook.sh", node, component, version) == 0
    return script(home, name, "health.sh", node) == 0


def sickened(home: Path, nodes: list[str]) -> set[str]:
    for n in nodes:
        assert script(home, "b", "hook.sh", n, "nic_firmware", "30.1") == 0
    return {n for n in nodes if (lab_dir(home, "b") / "sick" / f"{n}.nic_firmware").exists()}


def test_two_labs_run_side_by_side_and_one_sickens_on_a_bad_build(tmp_home: Path, two_labs) -> None:
    a, b = two_labs
    # two clusters, each its own controller, name and nodes
    assert (a["cluster"], a["nodes"]) == ("lab", ["h01", "h02"])
    assert (b["cluster"], b["nodes"]) == ("b", ["b01", "b02"])
    assert a["controller_port"] != b["controller_port"]
    for lab in (a, b):
        config = slurm(lab["slurm_conf"], "scontrol", "show", "config")
        assert re.search(rf"^ClusterName\s+= {lab['cluster']}$", config, re.M), config[:400]
        nodes = slurm(lab["slurm_conf"], "sinfo", "-h", "-N", "-o", "%N").split()
        assert sorted(nodes) == lab["nodes"]
    assert [tuple(x) for x in b["bad_versions"]] == [
        ("os", BAD, 1.0),
        ("nic_firmware", "30.1", 0.5),
    ]

    # lab b: the bad build installs (the node carries it) and the node is then unhealthy,
    # until a good build of that component replaces it; lab a (told nothing) stays healthy
    assert install(tmp_home, "b", "b01", "os", BAD) is False
    assert lab_versions(tmp_home, "b") == {"b01": {"os": BAD}}
    assert install(tmp_home, "b", "b01", "nic_firmware", "29.0") is False  # still sick: os
    assert install(tmp_home, "b", "b01", "os", "6.12.0") is True
    assert install(tmp_home, "lab", "h01", "os", BAD) is True

    # a rate makes the same share of nodes sick on every run, the same nodes each time
    # (names of no real node: what the health check would find is the node's sick mark)
    nodes = [f"n{i:03d}" for i in range(200)]
    first, again = [sickened(tmp_home, nodes) for _ in range(2)]
    assert first == again
    assert 0.35 <= len(first) / len(nodes) <= 0.65, len(first)

    # told again on the running lab: the list is replaced from the next install on
    code, info = trainctl(
        "lab", "slurm", "up", "--name", "b", "--bad-version", "os=6.12.0", "--json"
    )
    assert code == 0 and info["already_running"] is True, info
    assert install(tmp_home, "b", "b02", "os", "6.12.0") is False
    assert install(tmp_home, "b", "b02", "os", BAD) is True

    # stopping one leaves the other running
    code, _ = trainctl("lab", "slurm", "down", "--name", "b", "--json")
    assert code == 0
    assert lab_running(tmp_home, "b") is None
    assert lab_running(tmp_home) is not None
    assert sorted(slurm(a["slurm_conf"], "sinfo", "-h", "-N", "-o", "%N").split()) == a["nodes"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--bad-version", "os"], "bad_version"),
        (["--bad-version", "os=6.12:2"], "bad_version"),
        (["--bad-version", "os=6.12:often"], "bad_version"),
        (["--name", "Lab.B"], "name"),
    ],
)
def test_bad_lab_input_is_refused_naming_the_field(tmp_home: Path, args, field) -> None:
    code, out = trainctl("lab", "slurm", "up", "--nodes", "1", *args, "--json")
    assert code == 2 and out["field"] == field, out
    assert not lab_dir(tmp_home).exists() and not lab_dir(tmp_home, "b").exists()
