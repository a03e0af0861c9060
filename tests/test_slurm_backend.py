"""The Slurm backend's parts that need no cluster: parsing, error kinds, domains, the config.

The messages are the ones Slurm 22.05's commands print (seen on the lab); the end-to-end
behaviour against a real slurmctld is ``test_slurm_e2e``.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.contracts.errors import PERMANENT_KINDS, PermanentError, TemporaryError
from orchestrator.fleet.slurm.commands import (
    SlurmPermissionDenied,
    SlurmUnavailable,
    SlurmUnknownObject,
    classify_failure,
    expand_hostlist,
    parse_jobs,
    parse_nodes,
)
from orchestrator.fleet.slurm.config import Naming, render
from orchestrator.fleet.slurm.jobs import declared_checkpoint_hours
from orchestrator.fleet.slurm.topology import parse_topology


def test_slurm_errors_map_onto_permanent_and_temporary_kinds() -> None:
    down = classify_failure(
        ["sinfo", "--json"], 1, "slurm_load_partitions: Unable to contact slurm controller "
        "(connect failure)",
    )  # fmt: skip
    assert isinstance(down, SlurmUnavailable) and isinstance(down, TemporaryError)
    unknown = classify_failure(
        ["scontrol", "update", "nodename=h99"], 1, "slurm_update error: Invalid node name specified"
    )
    assert isinstance(unknown, SlurmUnknownObject) and isinstance(unknown, PermanentError)
    denied = classify_failure(
        ["scontrol", "reboot"], 1, "scontrol_reboot_nodes error: Access/permission denied"
    )
    assert isinstance(denied, SlurmPermissionDenied)
    for err in (unknown, denied):
        assert err.kind in PERMANENT_KINDS  # every retry policy gives up on them at once
    assert str(down).startswith("slurm: `sinfo --json` failed: ")


def test_hostlists_topology_and_naming_give_failure_domains() -> None:
    assert expand_hostlist("h[01-03,07],x1") == ["h01", "h02", "h03", "h07", "x1"]
    assert expand_hostlist("gpu[8-10]") == ["gpu8", "gpu9", "gpu10"]
    topo = parse_topology(
        "# two racks under one spine\n"
        "SwitchName=r1 Nodes=h[01-02]\nSwitchName=r2 Nodes=h[03-04]\n"
        "SwitchName=spine Switches=r[1-2]\n"
    )
    assert topo["h01"] == ("r1", "spine") and topo["h04"] == ("r2", "spine")
    naming = Naming(rack=r"^(c\d+-r\d+)-", zone=r"^(c\d+)-")
    assert naming.domain("c1-r07-n03") == ("c1-r07", "c1")
    assert Naming().domain("h07") == ("h", "default")


def test_job_comment_convention_and_hook_rendering() -> None:
    assert declared_checkpoint_hours("ckpt=30m") == 0.5
    assert declared_checkpoint_hours("team=llm ckpt=10s evict=go") == 10 / 3600
    assert declared_checkpoint_hours("no checkpoint here") is None
    cmd = render("hook {node} {component} {version}", node="h01", component="os", version="6.8 x")
    assert cmd == "hook h01 os '6.8 x'"  # shell-quoted: a version cannot run commands


def test_sinfo_and_squeue_json_are_read() -> None:
    nodes = parse_nodes(
        json.dumps(
            {
                "nodes": [
                    {
                        "name": "h01",
                        "state": "allocated",
                        "state_flags": ["DRAIN"],
                        "reason": "trainctl:train-lab maintenance",
                        "active_features": "os_6.8.0-45,cuda_12.4",
                        "partitions": ["main"],
                    },
                    {"name": "h02", "state": "down", "state_flags": ["DRAIN", "REBOOT_ISSUED"]},
                    {"name": "h03", "state": "idle", "state_flags": []},
                ]
            }
        )
    )
    h01, h02, h03 = nodes
    assert h01.drained and h01.features == ("os_6.8.0-45", "cuda_12.4")
    assert h02.rebooting and h02.out_of_service
    assert not h03.out_of_service
    (job,) = parse_jobs(
        json.dumps(
            {
                "jobs": [
                    {
                        "job_id": 7,
                        "job_state": "RUNNING",
                        "nodes": "h[01-02]",
                        "start_time": 100,
                        "end_time": 220,
                        "comment": "ckpt=5s",
                        "requeue": True,
                    }
                ]
            }
        )
    )
    assert job.running and job.nodes == ("h01", "h02") and job.requeue


def test_fleet_init_slurm_refuses_bad_input_naming_the_field(tmp_home: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(cli_main, ["fleet", "init", "--backend", "slurm", "--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["field"] == "slurm_conf"
    conf = tmp_home / "slurm.conf"
    conf.write_text("ClusterName=lab\n")
    bad = tmp_home / "backend.yaml"
    bad.write_text("hooks: {os: /bin/true}\nhelth_command: /bin/true\n")
    res = runner.invoke(
        cli_main,
        ["fleet", "init", "--backend", "slurm", "--slurm-conf", str(conf), "--backend-config",
         str(bad), "--json"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "helth_command" in json.loads(res.stdout)["error"]
    assert not (tmp_home / "fleet.db").exists()
