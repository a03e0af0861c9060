"""An operation scoped by partition, by hostlist and by feature on a real Slurm cluster (issue
29, #2).

A lab of eight with a second partition ``gpu`` (h01-h03) and static features ``a100`` (h04-h08)
and ``ib`` (h06-h07). Three operations run one after the other on one fleet: a ``lower-layer``
kernel scoped by ``partitions: [gpu]``, a ``cuda-upgrade`` scoped by ``nodes: h[04-05],h08``, and
another kernel scoped by ``features: [a100, ib]``. After each, exactly the scoped nodes changed,
both as the lab's install hook saw it (``versions.jsonl``) and in trainctl's record; every node
is back in service, and the audit passes at the end. A scope by the very feature an upgrade
replaces (``cuda_<old>``, a version feature trainctl publishes from its record) ends with every
node changed, its nodes leaving the scope wave by wave.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.fleet import open_backend
from orchestrator.lab.slurm import LabInfo, lab_down
from tests.e2e import audit_ok
from tests.test_slurm_e2e import node_table
from tests.test_slurm_ops import NEW, init_fleet, lab_up, run_op

GPU = ["h01", "h02", "h03"]
BY_HOSTLIST = ["h04", "h05", "h08"]
A100_IB = ["h06", "h07"]


@pytest.fixture
def labelled_lab(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        yield lab_up(
            tmp_home,
            "--partition", "gpu=h[01-03]",
            "--feature", "h[04-08]=a100",
            "--feature", "h[06-07]=ib",
        )  # fmt: skip
    finally:
        lab_down(tmp_home)


def installs(lab: LabInfo) -> list[dict[str, str]]:
    """Every install the lab's hook ran, in order."""
    path = Path(lab.slurm_conf).parent / "versions.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def record(path: Path, lab: LabInfo) -> dict[str, dict[str, str]]:
    """node -> versions, as trainctl's record has them."""
    fleet = open_backend(path)
    try:
        view = fleet.peek(lab.cluster)
        return {n: dict(view.host(n).versions) for n in lab.nodes}
    finally:
        fleet.close()


def op(lab: LabInfo, kind: str, targets: dict[str, str], **scope: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "scope": {"cluster": lab.cluster, **scope},
        "targets": targets,
        "budget": {"max_unavailable": 4},
        "drain": {"max_wait": "30s"},
        "request_id": f"slurm-scope-{uuid.uuid4().hex[:6]}",
    }


def _write(home: Path, spec: dict[str, Any], partitions: list[str]) -> Path:
    path = home / "typo.json"
    path.write_text(json.dumps({**spec, "scope": {**spec["scope"], "partitions": partitions}}))
    return path


async def run_scoped(
    dev_env, task_queue: str, lab: LabInfo, path: Path, spec: dict[str, Any], want: list[str]
) -> None:
    """Run ``spec``; exactly ``want`` got its targets (hook and record), nobody else changed."""
    before_record, seen = record(path, lab), len(installs(lab))
    status = await run_op(dev_env, task_queue, lab, path, spec)
    assert status.state == "succeeded", (status.state, status.reason)
    c = status.clusters[lab.cluster]
    assert c.hosts_in_scope == len(want) and c.hosts_changed == len(want), c
    new = installs(lab)[seen:]
    assert {i["node"] for i in new} == set(want), new
    assert {(i["component"], i["version"]) for i in new} == set(spec["targets"].items()), new
    after = record(path, lab)
    for node in lab.nodes:
        if node in want:
            assert all(after[node][k] == v for k, v in spec["targets"].items()), after[node]
        else:
            assert after[node] == before_record[node], (node, after[node])
    table = node_table(lab)
    assert not [n for n, (st, r, _) in table.items() if "drain" in st or r != "none"], table


async def test_operations_scoped_by_partition_hostlist_and_feature_on_slurm(
    dev_env, tmp_home, task_queue, labelled_lab
):
    lab = labelled_lab
    path = init_fleet(lab)
    first_os = record(path, lab)["h01"]["os"]
    table = node_table(lab)
    assert all("a100" in table[n][2].split(",") for n in [*BY_HOSTLIST, *A100_IB]), table
    # a lower-layer kernel on the gpu partition only, as `ops plan` previews it
    kernel = op(lab, "lower-layer", {"os": "6.12.0-9"}, partitions=["gpu"])
    spec_file = tmp_home / "kernel.json"
    spec_file.write_text(json.dumps(kernel))
    plan = CliRunner().invoke(cli_main, ["ops", "plan", "--spec", str(spec_file), "--json"])
    assert plan.exit_code == 0, plan.output
    assert sorted(h for w in json.loads(plan.stdout)["waves"] for h in w["hosts"]) == GPU
    typo = CliRunner().invoke(
        cli_main, ["ops", "plan", "--spec", str(_write(tmp_home, kernel, ["gpu", "gpx"])), "--json"]
    )
    assert typo.exit_code == 2 and json.loads(typo.stdout)["field"] == "scope.partitions", typo
    await run_scoped(dev_env, task_queue, lab, path, kernel, GPU)
    # a CUDA pair on the nodes a hostlist names
    cuda = op(lab, "cuda-upgrade", NEW, nodes="h[04-05],h08")
    await run_scoped(dev_env, task_queue, lab, path, cuda, BY_HOSTLIST)
    # another kernel on the nodes carrying both a100 and ib (h04, h05, h08 carry only a100)
    kernel2 = op(lab, "lower-layer", {"os": "6.12.0-10"}, features=["a100", "ib"])
    await run_scoped(dev_env, task_queue, lab, path, kernel2, A100_IB)
    final = record(path, lab)
    assert {n for n, v in final.items() if v["os"] == first_os} == {*BY_HOSTLIST}, final
    # the static features survive trainctl publishing its own <component>_<version> ones
    table = node_table(lab)
    assert all({"a100", "ib"} <= set(table[n][2].split(",")) for n in A100_IB), table
    assert all(f"cuda_{NEW['cuda']}" in table[n][2].split(",") for n in BY_HOSTLIST), table
    audit_ok(path)


async def test_a_scope_by_the_feature_an_upgrade_replaces_ends_with_every_node_changed(
    dev_env, tmp_home, task_queue, labelled_lab
):
    """``features: [cuda_<old>]`` over several waves: upgraded nodes leave the scope as their
    feature changes, and the operation ends when none is left, every node on the new pair."""
    lab = labelled_lab
    path = init_fleet(lab)
    old = record(path, lab)["h01"]["cuda"]
    spec = op(lab, "cuda-upgrade", NEW, features=[f"cuda_{old}"])
    spec["budget"] = {"max_unavailable": 3}
    status = await run_op(dev_env, task_queue, lab, path, spec)
    assert status.state == "succeeded", (status.state, status.reason)
    after = record(path, lab)
    assert all(after[n]["cuda"] == NEW["cuda"] for n in lab.nodes), after
    assert {i["node"] for i in installs(lab) if i["component"] == "cuda"} == set(lab.nodes)
    c = status.clusters[lab.cluster]
    assert c.waves_done == 3 and c.hosts_in_scope == 8 and c.hosts_changed == 8, c
    audit_ok(path)


def test_lab_labels_are_checked_before_anything_starts(tmp_home: Path) -> None:
    for args, field in [
        (["--partition", "main=h[01-02]"], "partition"),
        (["--partition", "gpu=h[01-09]"], "partition"),
        (["--feature", "h01"], "feature"),
        (["--feature", "x[1-2]=a100"], "feature"),
    ]:
        out = CliRunner().invoke(cli_main, ["lab", "slurm", "up", "--nodes", "8", *args, "--json"])
        assert out.exit_code == 2, out.output
        assert json.loads(out.stdout)["field"] == field, out.output
