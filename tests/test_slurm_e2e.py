"""A train against a real Slurm cluster: 16 slurmd, one slurmctld, real batch jobs, no mocks.

``trainctl lab slurm up`` starts the cluster on loopback; real ``sbatch --requeue`` jobs run
on it, one node is drained by hand as an operator would, and the slurmctld is restarted in the
middle of the cycle. What is asserted comes from Slurm itself (``sinfo`` sampled all along, the
job completion log, node features) and from trainctl's record and audit, never from the
workflow's word. The lab is stopped whatever happens (``lab_down`` kills exactly its own
processes, jobs included).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import fleet_path, open_backend
from orchestrator.lab.slurm import LabInfo, lab_down, lab_versions, restart_controller
from tests.e2e import terminate, wait_for
from workflows.cluster_train import ClusterTrain

TARGETS = {"os": "6.8.0-45", "bios": "3.2"}
OPERATOR_NODE = "h16"
OPERATOR_REASON = "operator: fan noise, ticket 4711"
BUDGET = 4
#: Slurm node states (``sinfo %T``) that take no jobs: what the budget bounds.
OUT_WORDS = ("drain", "down", "reboot", "fail", "maint")


def slurm(lab: LabInfo, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": lab.slurm_conf}
    return subprocess.run(
        list(args), env=env, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def node_table(lab: LabInfo) -> dict[str, tuple[str, str, str]]:
    """node -> (state, reason, features) as sinfo shows them."""
    out = {}
    for line in slurm(lab, "sinfo", "-h", "-N", "-o", "%N|%T|%E|%f").splitlines():
        name, state, reason, feats = line.split("|")
        out[name] = (state, reason, feats)
    return out


@pytest.fixture
def lab(tmp_home: Path) -> Iterator[LabInfo]:
    """``trainctl lab slurm up --nodes 16 --json``, and ``down`` whatever the test did."""
    try:
        up = CliRunner().invoke(cli_main, ["lab", "slurm", "up", "--nodes", "16", "--json"])
        assert up.exit_code == 0, up.output
        info = json.loads(up.stdout)
        assert info.pop("already_running") is False  # a new lab, said so
        yield LabInfo(**info)
    finally:
        down = CliRunner().invoke(cli_main, ["lab", "slurm", "down", "--json"])
        assert down.exit_code == 0, down.output
        lab_down(tmp_home)  # idempotent: nothing left to stop


class Sampler(threading.Thread):
    """Samples how many nodes Slurm shows out of service, until stopped."""

    def __init__(self, lab: LabInfo) -> None:
        super().__init__(daemon=True)
        self.lab = lab
        self.stop = threading.Event()
        self.samples: list[int] = []
        self.worst: dict[str, tuple[str, str, str]] = {}

    interval = 0.3

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                table = node_table(self.lab)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError):
                table = {}  # the controller is restarting
            if table:
                out = sum(any(w in s for w in OUT_WORDS) for s, _, _ in table.values())
                if not self.samples or out > max(self.samples):
                    self.worst = table
                self.samples.append(out)
                self.on_table(table)
            self.stop.wait(self.interval)

    def on_table(self, table: dict[str, tuple[str, str, str]]) -> None:
        """A subclass's look at each sample (per rack, per job, ...)."""


def job_states(lab: LabInfo) -> dict[int, str]:
    """Every job Slurm still lists on ``lab``: id -> state (RUNNING, PENDING, ...)."""
    lines = slurm(lab, "squeue", "-h", "-o", "%i|%T").split()
    return {int(i): state for i, state in (line.split("|") for line in lines)}


def assert_jobs_run_or_wait(lab: LabInfo, jobs: list[int]) -> None:
    """Each of ``jobs`` (long ones, submitted to ``lab``) still runs or waits again: a drain
    requeued it, never ended it."""
    states = job_states(lab)
    gone = {
        j: states.get(j) for j in jobs if states.get(j) not in ("RUNNING", "PENDING", "CONFIGURING")
    }
    assert not gone, (lab.cluster, gone, states)


def submit(lab: LabInfo, nodes: int, seconds: int) -> int:
    """A requeueable batch job that checkpoints every 5 s (the --comment convention), with a
    time limit just above its run time (what the drain policy takes for its end)."""
    out = slurm(
        lab,
        "sbatch",
        "--parsable",
        "--requeue",
        f"-N{nodes}",
        f"-t{seconds // 60 + 1}",
        "--comment=ckpt=5s",
        "-o/dev/null",
        f"--chdir={Path(lab.slurm_conf).parent}",
        f"--wrap=sleep {seconds}",
    )
    return int(out.strip().split(";")[0])


def job_log(lab: LabInfo) -> list[dict[str, str]]:
    path = Path(lab.slurm_conf).parent / "jobcomp.txt"
    if not path.exists():
        return []
    return [
        dict(f.split("=", 1) for f in line.split() if "=" in f)
        for line in path.read_text().splitlines()
        if line.strip()
    ]


async def test_train_on_slurm_keeps_budget_and_survives_controller_restart(
    dev_env, tmp_home, task_queue, lab
):
    """A train with max_unavailable 4 and a 30 s drain visits the 15 schedulable nodes of a
    16-node cluster while real jobs run, Slurm never shows more than 4 nodes out (the
    operator's drained node included), the operator's node keeps its reason, every job trainctl
    interrupted was requeued (none failed or was cancelled), and a slurmctld restart in the
    middle of the cycle changes nothing but the features, which trainctl puts back."""
    slurm(
        lab, "scontrol", "update", f"nodename={OPERATOR_NODE}", "state=drain",
        f"reason={OPERATOR_REASON}",
    )  # fmt: skip
    # Two jobs that outlive the 30 s drain deadline (the train must requeue them, after a
    # checkpoint) and one short one that may end by itself.
    jobs = [submit(lab, 4, 600), submit(lab, 8, 600), submit(lab, 2, 15)]
    cli = CliRunner().invoke(
        cli_main,
        [
            "fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
            "--backend-config", lab.backend_config, "--json",
        ],
    )  # fmt: skip
    assert cli.exit_code == 0, cli.output
    path = fleet_path(tmp_home)
    running = lambda: slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i").split()  # noqa: E731
    try:
        await wait_for(lambda: len(running()) == len(jobs), "the jobs to start")
    except AssertionError:
        print(slurm(lab, "squeue"), node_table(lab))
        raise

    spec = TrainSpec.model_validate(
        {
            "cluster": lab.cluster,
            "domain_size": BUDGET,
            "budget": {"max_unavailable": BUDGET},
            "drain": {"max_wait": "30s"},
            "targets": TARGETS,
            "stop_after_cycles": 1,
        }
    )
    sampler = Sampler(lab)
    sampler.start()
    await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    try:
        async with build_worker(dev_env.client, path, task_queue):
            handle = await dev_env.client.start_workflow(
                ClusterTrain.run,
                TrainInput(spec=spec),
                id=f"train-lab-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
            try:
                await wait_for(lambda: len(lab_versions(tmp_home)) >= 6, "six nodes updated", 240)
                await asyncio.to_thread(restart_controller, tmp_home)
                final = await asyncio.wait_for(handle.result(), 420)
            finally:
                await terminate(dev_env, handle.id)
                await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    finally:
        sampler.stop.set()
        sampler.join(5)

    assert final.cycles_completed >= 1, final
    # 15 nodes carry the new versions: the lab's own record (what the hooks did) and trainctl's.
    installed = lab_versions(tmp_home)
    schedulable = [n for n in lab.nodes if n != OPERATOR_NODE]
    assert sorted(installed) == schedulable, sorted(installed)
    assert all(installed[n] == TARGETS for n in schedulable), installed
    fleet = open_backend(path)
    try:
        b = fleet.peek(lab.cluster)
        for n in schedulable:
            assert b.host(n).versions["os"] == TARGETS["os"], n
        operator = b.host(OPERATOR_NODE)  # out of service in the record too, with the reason
        assert operator.state == "quarantined" and OPERATOR_REASON in operator.reason, operator
        report = audit(fleet)
        evictions = [e for _, e, _ in fleet.records() if e.kind == "job_interrupted"]
    finally:
        fleet.close()  # type: ignore[attr-defined]
    assert report.ok, report.violations[:3]
    # The commands an SRE runs work on the Slurm fleet as on the simulated one.
    for args in (["fleet", "status", "--json"], ["audit", "--json"]):
        res = CliRunner().invoke(cli_main, args)
        assert res.exit_code == 0, (args, res.output)
    status = json.loads(CliRunner().invoke(cli_main, ["fleet", "status", "--json"]).stdout)
    assert status["versions"]["os"][TARGETS["os"]] == len(schedulable), status

    # Never more than the budget out of service, as Slurm itself showed it.
    assert len(sampler.samples) > 20
    assert max(sampler.samples) <= BUDGET, sampler.worst
    # Nothing left drained by trainctl; the operator's node still drained with its reason; the
    # features say the new versions (re-applied after the controller forgot them).
    table = node_table(lab)
    assert not [n for n, (_, r, _) in table.items() if r.startswith("trainctl:")], table
    state, reason, _ = table[OPERATOR_NODE]
    assert "drain" in state and reason == OPERATOR_REASON, table[OPERATOR_NODE]
    for n in schedulable:
        assert f"os_{TARGETS['os']}" in table[n][2].split(","), (n, table[n])
    # No job failed or was cancelled: each finished, or was requeued and runs or waits again.
    ended = job_log(lab)
    # (Slurm logs a requeue with the state the job goes back to: PENDING.)
    bad = [j for j in ended if j.get("JobState") not in ("COMPLETED", "PENDING", "REQUEUED")]
    assert not bad, [(j.get("JobId"), j.get("JobState"), j.get("ExitCode")) for j in bad]
    assert evictions and all(e.detail["how"] == "requeued" for e in evictions), evictions
    left = slurm(lab, "squeue", "-h", "-o", "%i %T").split()
    assert {int(j) for j in left[::2]} | {int(j["JobId"]) for j in ended} >= set(jobs)
