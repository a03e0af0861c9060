"""Racks from a real ``topology.conf``, and the per-rack limit held on real Slurm (issue 29, #5).

``trainctl lab slurm up --racks 2`` writes a ``topology/tree`` ``topology.conf`` (two leaf
switches of four nodes under one zone switch) that slurmctld itself loads. ``fleet init
--backend slurm`` takes racks and zones from those switches, not from node names, and a train
with ``per_rack: 1`` never has two nodes of one rack out of service at once, as ``sinfo``
sampled all along shows, while it visits all eight nodes. The audit agrees.
"""

from __future__ import annotations

import asyncio
import json
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
from orchestrator.lab.slurm import LabInfo, lab_down, lab_versions
from tests.e2e import terminate
from tests.test_slurm_e2e import OUT_WORDS, Sampler, slurm
from workflows.cluster_train import ClusterTrain

TARGETS = {"os": "6.8.0-45"}
RACKS = {"rack1": ["h01", "h02", "h03", "h04"], "rack2": ["h05", "h06", "h07", "h08"]}


class RackSampler(Sampler):
    """The e2e test's sampler of Slurm's own view, also keeping the most nodes out per rack."""

    def __init__(self, lab: LabInfo) -> None:
        super().__init__(lab)
        self.per_rack_worst = dict.fromkeys(RACKS, 0)

    interval = 0.2

    def on_table(self, table: dict[str, tuple[str, str, str]]) -> None:
        out = {n for n, (state, _, _) in table.items() if any(w in state for w in OUT_WORDS)}
        for rack, nodes in RACKS.items():
            worst = self.per_rack_worst[rack]
            self.per_rack_worst[rack] = max(worst, len(out.intersection(nodes)))


@pytest.fixture
def racked_lab(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        up = CliRunner().invoke(
            cli_main, ["lab", "slurm", "up", "--nodes", "8", "--racks", "2", "--json"]
        )
        assert up.exit_code == 0, up.output
        info = json.loads(up.stdout)
        info.pop("already_running")
        yield LabInfo(**info)
    finally:
        lab_down(tmp_home)


async def test_racks_come_from_topology_conf_and_per_rack_holds(
    dev_env, tmp_home, task_queue, racked_lab
):
    lab = racked_lab
    # Slurm itself loaded the tree: its switches are the lab's racks.
    switches = slurm(lab, "scontrol", "show", "topology")
    assert "SwitchName=rack1" in switches and "SwitchName=zone1" in switches, switches
    init = CliRunner().invoke(
        cli_main,
        [
            "fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
            "--backend-config", lab.backend_config, "--json",
        ],
    )  # fmt: skip
    assert init.exit_code == 0, init.output
    path = fleet_path(tmp_home)
    fleet = open_backend(path)
    try:
        view = fleet.peek(lab.cluster)
        for rack, nodes in RACKS.items():
            for n in nodes:
                host = view.host(n)
                assert (host.rack, host.zone) == (rack, "zone1"), (n, host.rack, host.zone)
    finally:
        fleet.close()

    spec = TrainSpec.model_validate(
        {
            "cluster": lab.cluster,
            "domain_size": 4,
            "budget": {"max_unavailable": 4, "per_rack": 1},
            "drain": {"max_wait": "30s"},
            "targets": TARGETS,
            "stop_after_cycles": 1,
        }
    )
    sampler = RackSampler(lab)
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
                final = await asyncio.wait_for(handle.result(), 300)
            finally:
                await terminate(dev_env, handle.id)
                await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    finally:
        sampler.stop.set()
        sampler.join(5)

    assert final.cycles_completed >= 1, final
    installed = lab_versions(tmp_home)
    assert sorted(installed) == lab.nodes and all(v == TARGETS for v in installed.values())
    # Slurm never showed two nodes of one rack out at once, and maintenance did happen.
    assert len(sampler.samples) > 20
    assert max(sampler.samples) >= 1
    assert sampler.per_rack_worst == {"rack1": 1, "rack2": 1}, sampler.per_rack_worst
    fleet = open_backend(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    assert report.ok, report.violations[:3]
