"""One fleet of two real Slurm clusters: a CUDA upgrade over both, campaigns across them
(issue 29, #1 to #3).

Two labs of 8 nodes (``lab slurm up --name a`` and ``--name b``), each with its own slurmctld,
slurmds, munged and ClusterName, are one fleet (``fleet init --backend slurm --slurm-conf A
--backend-config CA --slurm-conf B --backend-config CB``). Real ``sbatch --requeue`` jobs run on
both. What is asserted comes from Slurm (``sinfo``/``squeue`` sampled all along, node features),
from what the site's hooks did (each lab's ``versions.jsonl``) and from trainctl's record and
audit.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.campaign_types import FINAL_STATES, CampaignStatus
from orchestrator.fleet import fleet_path
from orchestrator.lab.slurm import LabInfo, lab_down, lab_versions
from tests.cli_inproc import cli
from tests.e2e import audit_ok, terminate
from tests.test_slurm_e2e import OUT_WORDS, assert_jobs_run_or_wait, node_table, slurm, submit
from tests.test_slurm_ops import UPPER, features

NEW = {"gpu_driver": "580.65.06", "cuda": "13.1"}
GOOD_OS, BAD_OS = "6.12.0-9", "6.12.0-bad"
BUDGET = 4


def lab_up(home: Path, name: str, *extra: str) -> LabInfo:
    up = CliRunner().invoke(
        cli_main, ["lab", "slurm", "up", "--name", name, "--nodes", "8", *extra, "--json"]
    )
    assert up.exit_code == 0, up.output
    info = json.loads(up.stdout)
    info.pop("already_running")
    return LabInfo(**info)


@pytest.fixture
def two_labs(tmp_home: Path, request: pytest.FixtureRequest) -> Iterator[tuple[LabInfo, LabInfo]]:
    bad = getattr(request, "param", ())
    try:
        a = lab_up(tmp_home, "a", *bad)
        b = lab_up(tmp_home, "b")
        init = CliRunner().invoke(
            cli_main,
            [
                "fleet", "init", "--backend", "slurm",
                "--slurm-conf", a.slurm_conf, "--backend-config", a.backend_config,
                "--slurm-conf", b.slurm_conf, "--backend-config", b.backend_config, "--json",
            ],
        )  # fmt: skip
        assert init.exit_code == 0, init.output
        out = json.loads(init.stdout)
        assert sorted(out["clusters"]) == ["a", "b"] and out["hosts_total"] == 16, out
        yield a, b
    finally:
        lab_down(tmp_home, "a")
        lab_down(tmp_home, "b")


class FleetSampler(threading.Thread):
    """Both clusters as Slurm shows them: nodes out per cluster, and any running job whose
    nodes carry two different driver/CUDA pairs."""

    def __init__(self, labs: tuple[LabInfo, ...], pin: tuple[str, ...] = ()) -> None:
        super().__init__(daemon=True)
        self.labs, self.stop = labs, threading.Event()
        self.worst_out = {lab.cluster: 0 for lab in labs}
        self.mixed: list[Any] = []
        self.samples = 0
        #: ``pin``: the features of the new pair; once a cluster has nodes on it and nodes not
        #: yet, a one-node job constrained to it is submitted there (cluster -> job id).
        self.pin, self.pinned = pin, {}

    def _pin(self, lab: LabInfo, table: dict[str, Any]) -> None:
        on_new = {features(f) == self.pin for _, _, f in table.values()}
        if self.pin and lab.cluster not in self.pinned and on_new == {True, False}:
            constraint = "&".join(self.pin)
            job = slurm(lab, "sbatch", "--parsable", "-N1", f"--constraint={constraint}",
                        "-o/dev/null", "--wrap=sleep 1")  # fmt: skip
            self.pinned[lab.cluster] = int(job.strip().split(";")[0])

    def run(self) -> None:
        while not self.stop.is_set():
            for lab in self.labs:
                try:
                    table = node_table(lab)
                    jobs = slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i|%N").split()
                except Exception:  # a late answer: the next sample counts
                    continue
                self._pin(lab, table)
                out = sum(any(w in s for w in OUT_WORDS) for s, _, _ in table.values())
                self.worst_out[lab.cluster] = max(self.worst_out[lab.cluster], out)
                for line in jobs:
                    job, hostlist = line.split("|")
                    nodes = slurm(lab, "scontrol", "show", "hostnames", hostlist).split()
                    if len({features(table[n][2]) for n in nodes if n in table}) > 1:
                        self.mixed.append((lab.cluster, job, nodes))
                self.samples += 1
            self.stop.wait(0.3)


async def run_cli_with_worker(dev_env, tmp_home, task_queue, *args: str):
    path = fleet_path(tmp_home)
    async with build_worker(dev_env.client, path, task_queue):
        try:
            return await cli(*args, "--task-queue", task_queue, "--json")
        finally:
            for c in ("a", "b"):
                await terminate(dev_env, arbiter_workflow_id(c, task_queue))
                await terminate(dev_env, f"train-{c}")


async def run_campaign(dev_env, tmp_home, task_queue, spec: dict[str, Any], timeout: float):
    """``campaign start`` with a worker running, then its status until it ends (printed as it
    goes, so a run that does not end shows where it stood): (exit code, last status)."""
    path = fleet_path(tmp_home)
    async with build_worker(dev_env.client, path, task_queue):
        try:
            code, out, err = await cli(
                "campaign", "start", "--spec", write(tmp_home, spec["name"], spec),
                "--task-queue", task_queue, "--json",
            )  # fmt: skip
            assert code == 0, (out, err)
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                code, out, err = await cli("campaign", "status", "--id", spec["name"], "--json")
                status = CampaignStatus.model_validate(out)
                print(status.state, status.stage, [s.state for s in status.stages], status.reason)
                if status.state in FINAL_STATES:
                    return status
                assert asyncio.get_running_loop().time() < deadline, status
                await asyncio.sleep(5)
        finally:
            for c in ("a", "b"):
                await terminate(dev_env, f"campaign-{spec['name']}")
                await terminate(dev_env, arbiter_workflow_id(c, task_queue))
                await terminate(dev_env, f"train-{c}")


def write(tmp_home: Path, name: str, spec: dict[str, Any]) -> str:
    path = tmp_home / f"{name}.json"
    path.write_text(json.dumps(spec))
    return str(path)


async def test_cuda_upgrade_over_two_slurm_clusters(
    dev_env, tmp_home, task_queue, two_labs, monkeypatch
):
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    a, b = two_labs
    jobs = [submit(a, 4, 600), submit(b, 4, 600), submit(b, 2, 600)]
    spec = {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "*"},
        "targets": NEW,
        "consistency": "job",
        "budget": {"max_unavailable": BUDGET},
        "drain": {"max_wait": "30s"},
        "request_id": "cuda-13-1-two-clusters",
    }
    want = tuple(sorted(f"{c}_{v}" for c, v in NEW.items()))
    sampler = FleetSampler((a, b), pin=want)
    sampler.start()
    try:
        code, status, err = await asyncio.wait_for(
            run_cli_with_worker(
                dev_env, tmp_home, task_queue, "ops", "start",
                "--spec", write(tmp_home, "op", spec), "--wait",
            ),
            420,
        )  # fmt: skip
    finally:
        sampler.stop.set()
        sampler.join(5)
    assert code == 0 and status["state"] == "succeeded", (status, err)
    assert sampler.samples > 20 and not sampler.mixed, sampler.mixed[:3]
    assert max(sampler.worst_out.values()) <= BUDGET, sampler.worst_out
    for lab in (a, b):
        installed = lab_versions(tmp_home, lab.cluster)
        assert sorted(installed) == lab.nodes, (lab.cluster, installed)
        assert all({c: v[c] for c in UPPER} == NEW for v in installed.values())
        table = node_table(lab)
        assert all(features(f) == want for _, _, f in table.values()), table
        assert not [n for n, (_, r, _) in table.items() if r.startswith("trainctl:")], table
        # the job constrained to the new pair, submitted while the operation ran, ran on a
        # node of that pair (Slurm starts it only where the features trainctl published match)
        pinned = sampler.pinned.get(lab.cluster)
        assert pinned is not None, f"{lab.cluster} never had old and new nodes at once"
        shown = slurm(lab, "scontrol", "show", "job", "-o", str(pinned))
        fields = dict(w.split("=", 1) for w in shown.split() if "=" in w)
        assert fields["JobState"] in ("RUNNING", "COMPLETING", "COMPLETED"), shown
        assert features(table[fields["NodeList"]][2]) == want, (shown, table)
    assert_jobs_run_or_wait(a, jobs[:1])
    assert_jobs_run_or_wait(b, jobs[1:])
    audit_ok(fleet_path(tmp_home))


def campaign(name: str, os_version: str) -> dict[str, Any]:
    return {
        "name": name,
        "targets": {"os": os_version},
        "scope": {"cluster": "*"},
        "stages": [
            {"name": "canary", "clusters": ["a"], "hosts": 2, "bake": "30s"},
            {"name": "first-cluster", "clusters": ["a"]},
            {"name": "rest", "clusters": ["b"]},
        ],
        "gates": {"max_failures": 0},
        "train": {
            "domain_size": BUDGET,
            "budget": {"max_unavailable": BUDGET},
            "drain": {"max_wait": "30s"},
        },
    }  # fmt: skip


def ever_had(path: Path, component: str, version: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT host, detail FROM events WHERE kind = 'updated'").fetchall()
    finally:
        conn.close()
    return {h for h, d in rows if json.loads(d).get("after", {}).get(component) == version}


async def test_good_kernel_campaign_rolls_through_both_slurm_clusters(
    dev_env, tmp_home, task_queue, two_labs, monkeypatch
):
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    a, b = two_labs
    submit(a, 2, 600)
    status = await run_campaign(
        dev_env, tmp_home, task_queue, campaign("kernel-good", GOOD_OS), 420
    )
    assert status.state == "succeeded", status.reason
    assert [s.state for s in status.stages] == ["passed", "passed", "passed"]
    for lab in (a, b):
        installed = lab_versions(tmp_home, lab.cluster)
        assert sorted(installed) == lab.nodes and all(
            v["os"] == GOOD_OS for v in installed.values()
        ), installed
    audit_ok(fleet_path(tmp_home))


@pytest.mark.parametrize("two_labs", [("--bad-version", f"os={BAD_OS}")], indirect=True)
async def test_bad_kernel_campaign_stops_in_its_canary_on_slurm(
    dev_env, tmp_home, task_queue, two_labs, monkeypatch
):
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    a, b = two_labs
    status = await run_campaign(dev_env, tmp_home, task_queue, campaign("kernel-bad", BAD_OS), 420)
    assert status.state == "rolled_back", (status.state, status.reason)
    assert status.stage == "canary" and status.stages[0].state == "failed"
    assert [s.state for s in status.stages[1:]] == ["pending", "pending"]
    path = fleet_path(tmp_home)
    got = ever_had(path, "os", BAD_OS)
    assert 0 < len(got) <= 2 and all(h.startswith("a") for h in got), got
    # blame names the kernel, marked bad fleet-wide; the canary went back through the hooks
    top = status.blame[0]
    assert (top.component, top.version, top.campaign) == ("os", BAD_OS, "kernel-bad"), status.blame
    code, listed, _ = await cli("versions", "list", "--json")
    assert ("os", BAD_OS) in [(e["component"], e["version"]) for e in listed["bad_versions"]]
    now = lab_versions(tmp_home, "a")
    assert all(now[h]["os"] != BAD_OS for h in got), now
    # cluster b never got it: its hooks ran for nothing
    assert not lab_versions(tmp_home, "b")
    table = node_table(b)
    assert not [n for n, (s, r, _) in table.items() if "drain" in s or r != "none"], table
    audit_ok(path)
