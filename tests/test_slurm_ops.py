"""A CUDA upgrade as a bulk operation on a real Slurm cluster (issue 29, #2).

Eight slurmd on loopback, a real requeueable job on four of them. ``cuda-upgrade`` with
``consistency: job`` moves the job's nodes together, so Slurm (sampled all along) never runs a
job on nodes that carry different driver/CUDA features; at the cutover each node's features say
the new versions, so ``sbatch --constraint=cuda_13.1`` lands only on upgraded nodes. With the
lab told the CUDA build is bad on half the nodes (they fail the health check after it), the
wave fails verification and is rolled back whole through the site's hooks to the previous pair.
A node whose CUDA hook itself fails is put back on its old driver, so no node carries half a
pair. Every case ends with the audit passing.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.fleet import fleet_path, open_backend
from orchestrator.lab.slurm import LabInfo, lab_down, lab_versions
from tests.e2e import audit_ok, outcome, start_op, terminate
from tests.test_slurm_e2e import node_table, slurm, submit

NEW = {"gpu_driver": "580.65.06", "cuda": "13.1"}
UPPER = ("gpu_driver", "cuda")


def lab_up(home: Path, *extra: str) -> LabInfo:
    up = CliRunner().invoke(cli_main, ["lab", "slurm", "up", "--nodes", "8", *extra, "--json"])
    assert up.exit_code == 0, up.output
    info = json.loads(up.stdout)
    info.pop("already_running")
    return LabInfo(**info)


@pytest.fixture
def lab8(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        yield lab_up(tmp_home)
    finally:
        lab_down(tmp_home)


@pytest.fixture
def bad_cuda_lab(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        yield lab_up(tmp_home, "--bad-version", f"cuda={NEW['cuda']}:0.5")
    finally:
        lab_down(tmp_home)


def features(feats: str) -> tuple[str, ...]:
    """The node's driver/CUDA features, e.g. ('gpu_driver_560.35.03', 'cuda_12.6')."""
    return tuple(sorted(f for f in feats.split(",") if f.startswith(UPPER)))


class MixSampler(threading.Thread):
    """Every running job's nodes, and the driver/CUDA features each carries, until stopped."""

    def __init__(self, lab: LabInfo) -> None:
        super().__init__(daemon=True)
        self.lab, self.stop, self.samples, self.mixed = lab, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                table = node_table(self.lab)
                jobs = slurm(self.lab, "squeue", "-h", "-t", "R", "-o", "%i|%N").split()
            except Exception:  # a late answer: the next sample counts
                jobs, table = [], {}
            for line in jobs:
                job, hostlist = line.split("|")
                nodes = slurm(self.lab, "scontrol", "show", "hostnames", hostlist).split()
                kinds = {features(table[n][2]) for n in nodes if n in table}
                if len(kinds) > 1:
                    self.mixed.append((job, nodes, kinds))
            self.samples += bool(table)
            self.stop.wait(0.3)


def init_fleet(lab: LabInfo) -> Path:
    init = CliRunner().invoke(
        cli_main,
        [
            "fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
            "--backend-config", lab.backend_config, "--json",
        ],
    )  # fmt: skip
    assert init.exit_code == 0, init.output
    return fleet_path(Path(lab.slurm_conf).parent.parent)


def cuda_op(lab: LabInfo, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "cuda-upgrade",
        "scope": {"cluster": lab.cluster},
        "targets": NEW,
        "consistency": "job",
        "budget": {"max_unavailable": 4},
        "drain": {"max_wait": "30s"},
        "request_id": f"slurm-cuda-{uuid.uuid4().hex[:6]}",
        **extra,
    }


async def run_op(dev_env, task_queue: str, lab: LabInfo, path: Path, spec: dict[str, Any]):
    async with build_worker(dev_env.client, path, task_queue):
        try:
            handle = await start_op(dev_env, task_queue, spec)
            return await asyncio.wait_for(outcome(handle), 300)
        finally:
            await terminate(dev_env, spec["request_id"])
            await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))


def pairs(path: Path, lab: LabInfo) -> dict[str, tuple[str, ...]]:
    """node -> (gpu_driver, cuda) as trainctl's record has it."""
    fleet = open_backend(path)
    try:
        view = fleet.peek(lab.cluster)
        return {n: tuple(view.host(n).versions[c] for c in UPPER) for n in lab.nodes}
    finally:
        fleet.close()


async def test_cuda_upgrade_on_slurm_moves_a_job_together_and_switches_features(
    dev_env, tmp_home, task_queue, lab8
):
    lab = lab8
    job = submit(lab, 4, 600)
    path = init_fleet(lab)
    sampler = MixSampler(lab)
    sampler.start()
    try:
        status = await run_op(dev_env, task_queue, lab, path, cuda_op(lab))
    finally:
        sampler.stop.set()
        sampler.join(5)
    assert status.state == "succeeded", (status.state, status.reason)
    # every node got the pair through the site's hook; none ran a job on mixed versions
    installed = lab_versions(tmp_home)
    assert sorted(installed) == lab.nodes
    assert all({k: v[k] for k in UPPER} == NEW for v in installed.values()), installed
    assert sampler.samples > 10 and not sampler.mixed, sampler.mixed[:3]
    table = node_table(lab)
    want = tuple(sorted(f"{c}_{v}" for c, v in NEW.items()))
    assert all(features(f) == want for _, _, f in table.values()), table
    assert not [n for n, (_, r, _) in table.items() if r.startswith("trainctl:")], table
    # a job asking for the new CUDA runs on upgraded nodes
    pinned = slurm(lab, "sbatch", "--parsable", "-N1", "--constraint=cuda_13.1", "--wrap=true")
    assert pinned.strip()
    # the job that ran was requeued, not failed
    left = slurm(lab, "squeue", "-h", "-j", str(job), "-o", "%T").split()
    assert left and left[0] in ("RUNNING", "PENDING"), left
    audit_ok(path)


async def test_bad_cuda_build_on_slurm_fails_the_wave_and_rolls_it_back(
    dev_env, tmp_home, task_queue, bad_cuda_lab
):
    lab = bad_cuda_lab
    path = init_fleet(lab)
    old = pairs(path, lab)
    # one wave of all eight (the whole cluster may be out), no failure allowed
    spec = cuda_op(lab, max_failures=0, budget={"max_unavailable": 8})
    status = await run_op(dev_env, task_queue, lab, path, spec)
    assert status.state == "failed", (status.state, status.reason)
    assert "rolled back" in status.reason, status.reason
    # every node installed the build (the hook took it), about half then failed verification,
    # and the whole wave went back to the old pair through the hooks: in service again
    installs = [
        json.loads(line)
        for line in (Path(lab.slurm_conf).parent / "versions.jsonl").read_text().splitlines()
    ]
    took = {i["node"] for i in installs if i["component"] == "cuda" and i["version"] == NEW["cuda"]}
    assert took == set(lab.nodes), installs
    assert pairs(path, lab) == old
    assert all(v["cuda"] != NEW["cuda"] for v in lab_versions(tmp_home).values())
    c = status.clusters[lab.cluster]
    # (a host that failed its check is rolled back too, then counted as quarantined or back)
    assert c.hosts_changed == 0 and c.hosts_rolled_back >= len(lab.nodes) - 2, c
    table = node_table(lab)
    old_features = {
        tuple(sorted(f"{c}_{v}" for c, v in zip(UPPER, pair, strict=True))) for pair in old.values()
    }
    assert {features(f) for _, _, f in table.values()} == old_features, table
    # every node is back in service, or held by trainctl's quarantine with its reason: two
    # reboots seconds apart (the build's, then the rollback's) can leave a lab node's second
    # boot unseen by slurmctld under load, and verify then quarantines it, which is honest
    held = {n: r for n, (st, r, _) in table.items() if "drain" in st or r != "none"}
    assert all(r.startswith("trainctl:quarantine ") for r in held.values()), table
    assert len(held) <= 2, table
    audit_ok(path)


async def test_an_operation_waiting_for_room_an_operator_holds_goes_on_soon_after_the_resume(
    dev_env, tmp_home, task_queue, lab8
):
    """Nobody signals trainctl when an operator resumes a node: the waiting operation must find
    out by looking, within a minute of wall time on Slurm (it looked a quarter of a real hour
    later before ``MAX_POLL_WALL_SECONDS``)."""
    lab = lab8
    path = init_fleet(lab)
    held = lab.nodes[:2]
    for n in held:
        slurm(lab, "scontrol", "update", f"nodename={n}", "state=drain", "reason=operator: cabling")
    spec = cuda_op(lab, budget={"max_unavailable": 2})
    async with build_worker(dev_env.client, path, task_queue):
        try:
            handle = await start_op(dev_env, task_queue, spec)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            while True:  # the operator's two nodes fill the budget: the operation waits
                st = await handle.query("status", result_type=OperationStatus)
                c = st.clusters.get(lab.cluster)
                if c is not None and c.state.startswith("waiting"):
                    break
                assert loop.time() - t0 < 120 and (c is None or c.hosts_changed == 0), (st.state, c)
                await asyncio.sleep(0.5)
            await asyncio.sleep(2)
            for n in held:
                slurm(lab, "scontrol", "update", f"nodename={n}", "state=resume")
            resumed = loop.time()
            status = await asyncio.wait_for(outcome(handle), 300)
            took = loop.time() - resumed
        finally:
            await terminate(dev_env, spec["request_id"])
            await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    assert status.state == "succeeded", (status.state, status.reason)
    # a liveness bound: the cap is 30 s, and the eight nodes change in well under a minute alone
    assert took < 200, took
    assert all({k: v[k] for k in UPPER} == NEW for v in lab_versions(tmp_home).values())
    audit_ok(path)


async def test_a_drain_on_slurm_sees_a_job_end_before_its_time_limit(
    dev_env, tmp_home, task_queue, lab8
):
    """A job ending long before its time limit (what the drain takes for its end: 8 minutes,
    inside the 20 of ``drain.max_wait``, so the drain waits for it rather than evicting) frees
    its nodes unannounced: the operation's drain looks again within ``MAX_POLL_WALL_SECONDS``
    and goes on, instead of waiting out the 8 minutes."""
    lab = lab8
    path = init_fleet(lab)
    out = slurm(lab, "sbatch", "--parsable", "-N8", "-t8", "-o/dev/null",
                f"--chdir={Path(lab.slurm_conf).parent}", "--wrap=sleep 10")  # fmt: skip
    job = out.strip().split(";")[0]
    for _ in range(100):  # running on all eight before the operation starts
        if slurm(lab, "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING":
            break
        await asyncio.sleep(0.2)
    spec = cuda_op(lab, budget={"max_unavailable": 8}, drain={"max_wait": "20m"})
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    status = await run_op(dev_env, task_queue, lab, path, spec)
    took = loop.time() - t0
    assert status.state == "succeeded", (status.state, status.reason)
    assert status.jobs_interrupted == 0, status  # it ended by itself, nobody evicted it
    assert took < 240, took  # a liveness bound: the job's limit was 8 minutes away
    assert all({k: v[k] for k in UPPER} == NEW for v in lab_versions(tmp_home).values())
    audit_ok(path)
