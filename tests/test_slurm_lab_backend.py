"""The Slurm backend's paths the train's happy cycle does not take, on a real 2-node lab.

No Temporal here: the backend's sessions are driven directly, as an activity would, against a
real slurmctld and slurmd. A job that cannot be requeued is cancelled (and the record says so),
a hook that fails for good fails the install and the node is quarantined (kept drained with
trainctl's reason), an operator's resume of that node is respected, and Slurm's "no such node"
is a permanent error.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.contracts.backend import PiggybackClaim
from orchestrator.contracts.errors import PERMANENT_KINDS
from orchestrator.fleet.slurm import SlurmFleet
from orchestrator.fleet.slurm.commands import SlurmUnknownObject
from orchestrator.fleet.slurm.config import SlurmBackendConfig
from orchestrator.fleet.slurm.steering import DEFAULT_WEIGHT, DUE_WEIGHT
from orchestrator.lab.slurm import LabInfo, lab_down, lab_up

OWNER = "op-test"


@pytest.fixture
def lab2(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        yield lab_up(tmp_home, nodes=2)
    finally:
        lab_down(tmp_home)


def slurm(lab: LabInfo, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": lab.slurm_conf}
    return subprocess.run(
        list(args), env=env, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def until(check, what: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)
    return value


def test_cancel_quarantine_operator_resume_and_unknown_node(lab2: LabInfo, tmp_home: Path):
    config = SlurmBackendConfig(hooks={"*": "true", "bios": "echo flash failed; exit 3"})
    fleet = SlurmFleet.create(tmp_home / "fleet.db", Path(lab2.slurm_conf), config)
    job = int(
        slurm(lab2, "sbatch", "--parsable", "--no-requeue", "-N1", "-wh01", "-o/dev/null",
              f"--chdir={tmp_home}", "--wrap=sleep 300").split(";")[0]
    )  # fmt: skip
    until(lambda: slurm(lab2, "squeue", "-h", "-t", "R", "-o", "%i").split(), "the job to run")
    try:
        with fleet.cluster("lab") as b:
            assert b.cordon("h01", OWNER, OWNER, limit=2)
            assert not b.cordon("h02", OWNER, OWNER, limit=1)  # the budget counts h01
            assert b.host("h01").job_id == job
            b.evict(job, OWNER)  # --no-requeue: cancelled, and said so
        until(lambda: not slurm(lab2, "squeue", "-h", "-o", "%i").split(), "the job to go")
        with fleet.cluster("lab") as b:
            assert b.begin_update("h01", OWNER)
            out = b.install("h01", {"os": "6.8.0-45", "bios": "3.2"}, OWNER, "0")
            assert not out.ok and out.permanent and out.failed_component == "bios"
            assert b.host("h01").versions["bios"] == "3.1"  # the record keeps what the node has
            b.quarantine("h01", OWNER, "update of bios failed permanently")
        rows = slurm(lab2, "sinfo", "-h", "-N", "-o", "%N|%E").splitlines()
        table = dict(line.split("|", 1) for line in rows if line)
        assert table["h01"].startswith("trainctl:quarantine update of bios failed"), table
        evs = [e for _, e, _ in fleet.records()]
        (cut,) = [e for e in evs if e.kind == "job_interrupted"]
        assert cut.detail["how"].startswith("cancelled: the job cannot be requeued"), cut
        failed = [e for e in evs if e.kind == "update_failed"]
        assert failed and failed[-1].detail["reason"] == "flash failed", failed

        slurm(lab2, "scontrol", "update", "nodename=h01", "state=resume")  # a person triaged it
        with fleet.cluster("lab") as b:
            h = b.host("h01")
            assert (h.state, h.owner) == ("in_service", ""), h
        with pytest.raises(SlurmUnknownObject) as err:
            fleet.commands.drain("h99", "trainctl:x")
        assert err.value.kind in PERMANENT_KINDS
    finally:
        fleet.close()


def _weights(lab: LabInfo) -> dict[str, int]:
    rows = slurm(lab, "sinfo", "-h", "-N", "-o", "%N|%w").splitlines()
    return {n: int(w) for n, w in (line.split("|") for line in rows if line)}


def test_a_steering_claim_weights_due_nodes_so_slurm_places_jobs_on_visited_ones(
    lab2: LabInfo, tmp_home: Path
):
    """A job-aware train's claim (``visited_first``) through the real Slurm: the node still due
    gets a higher Weight than the visited one, so Slurm's allocator puts a new job on the
    visited node and leaves the due one idle for the train; withdrawing the claim puts the
    weights back."""
    fleet = SlurmFleet.create(tmp_home / "fleet.db", Path(lab2.slurm_conf), SlurmBackendConfig())
    try:
        assert _weights(lab2) == {"h01": 1, "h02": 1}
        with fleet.cluster("lab") as b:
            b.hosts["h02"].last_visit = b.now  # h02 was visited this cycle, h01 is due
            b.dirty_hosts.add("h02")
            claim = PiggybackClaim(OWNER, b.now - 1.0, 2, 2, until_hours=b.now + 2.0)
            b.set_piggyback(replace(claim, visited_first=True))
        assert _weights(lab2) == {"h01": DUE_WEIGHT, "h02": DEFAULT_WEIGHT}
        for _ in range(2):  # each job goes to the visited node while it is free
            job = slurm(lab2, "sbatch", "--parsable", "-N1", "-o/dev/null",
                        f"--chdir={tmp_home}", "--wrap=sleep 1").split(";")[0]  # fmt: skip
            node = until(
                lambda job=job: slurm(lab2, "squeue", "-h", "-j", job, "-t", "R", "-o", "%N"),
                "the job to run",
            )
            assert node.strip() == "h02", node
            until(lambda job=job: not slurm(lab2, "squeue", "-h", "-j", job), "the job to end")
        with fleet.cluster("lab") as b:
            b.set_piggyback(None)
        assert _weights(lab2) == {"h01": DEFAULT_WEIGHT, "h02": DEFAULT_WEIGHT}
    finally:
        fleet.close()


def test_a_failed_cuda_hook_puts_the_driver_back_so_no_node_carries_half_a_pair(
    lab2: LabInfo, tmp_home: Path
):
    """The upper layer is all or nothing on a node: the driver's hook ran, CUDA's failed, so
    the driver is reinstalled at its previous version through its hook, the record says the
    node carries the old pair, and the failure names CUDA."""
    calls = tmp_home / "hook-calls.txt"
    config = SlurmBackendConfig(
        hooks={
            "gpu_driver": f"echo {{node}} {{component}} {{version}} >> {calls}",
            "cuda": "echo cuda toolkit download failed; exit 3",
        }
    )
    fleet = SlurmFleet.create(tmp_home / "fleet.db", Path(lab2.slurm_conf), config)
    try:
        with fleet.cluster("lab") as b:
            old = dict(b.host("h01").versions)
            assert b.cordon("h01", OWNER, OWNER, limit=1)
            assert b.begin_update("h01", OWNER)
            out = b.install("h01", {"gpu_driver": "580.65.06", "cuda": "13.1"}, OWNER, "0")
            assert not out.ok and out.permanent and out.failed_component == "cuda"
            now = b.host("h01").versions
            assert (now["gpu_driver"], now["cuda"]) == (old["gpu_driver"], old["cuda"])
            b.quarantine("h01", OWNER, "update of cuda failed permanently")
        assert calls.read_text().split("\n")[:2] == [
            "h01 gpu_driver 580.65.06",
            f"h01 gpu_driver {old['gpu_driver']}",
        ]
        updated = [e for _, e, _ in fleet.records() if e.kind == "updated"]
        assert not updated, updated  # nothing the node kept changed
    finally:
        fleet.close()


def test_the_lab_keeps_its_sockets_short_when_tmpdir_is_deep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket path may not exceed 108 bytes: a lab under a deep TMPDIR (a test's, a batch
    job's) still puts munge's and slurmd's sockets where they fit, the same place every time."""
    import tempfile

    from orchestrator.lab.slurm_files import short_dir

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    lab = tmp_path / "lab"
    where = short_dir(lab)
    assert len(str(where / "spool" / "h01" / "h01_4294967294.4294967292")) <= 108, where
    assert short_dir(lab) == where and short_dir(tmp_path / "other") != where
