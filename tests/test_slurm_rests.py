"""A train on a real Slurm cluster already on its targets drains nothing and stops no job.

``trainctl lab slurm up`` starts 8 slurmd on loopback; real ``sbatch --requeue`` jobs fill
them; the train, started with the versions the nodes run, checks every node in place and
rests. From its start until it has rested ``REST_SECONDS`` of wall time, Slurm itself
(``sinfo``, ``scontrol show job``) shows no node drained by trainctl and no job restarted.
"""

from __future__ import annotations

import asyncio
import re
import time
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
from orchestrator.contracts.train_types import ControlRequest, TrainInput
from orchestrator.fleet import fleet_path, open_backend
from orchestrator.fleet.presets import INITIAL_VERSIONS
from orchestrator.lab.slurm import LabInfo
from tests.e2e import terminate, wait_for
from tests.test_slurm_e2e import node_table, slurm, submit
from tests.test_slurm_hook_limits import lab_cli
from workflows.cluster_train import ClusterTrain

ON_TARGET = {c: INITIAL_VERSIONS[c] for c in ("os", "bios", "nic_firmware")}
#: Wall time the train must rest on target, once it says it rests, without touching a node or
#: a job (a resting train wakes only for a health visit falling due or new targets).
REST_SECONDS = 20.0
#: Wall time the train has to check every node in place and rest.
SETTLE_SECONDS = 120.0


@pytest.fixture
def lab8(tmp_home: Path) -> Iterator[LabInfo]:
    yield from lab_cli(tmp_home, 8)


def _restarts(lab: LabInfo, jobs: list[int]) -> dict[int, int]:
    """job -> ``Restarts`` as slurmctld counts them (requeues)."""
    out = {}
    for j in jobs:
        text = slurm(lab, "scontrol", "show", "job", str(j))
        m = re.search(r"Restarts=(\d+)", text)
        out[j] = int(m.group(1)) if m else -1
    return out


async def test_a_train_on_target_on_slurm_drains_nothing(dev_env, tmp_home, task_queue, lab8):
    """On target: every node checked in place, none drained by trainctl, no job restarted,
    the train resting and still resting a while later; the audit holds."""
    lab = lab8
    jobs = [submit(lab, 4, 600), submit(lab, 4, 600)]
    init = CliRunner().invoke(
        cli_main,
        [
            "fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
            "--backend-config", lab.backend_config, "--json",
        ],
    )  # fmt: skip
    assert init.exit_code == 0, init.output
    path = fleet_path(tmp_home)
    running = lambda: slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i").split()  # noqa: E731
    await wait_for(lambda: len(running()) == len(jobs), "the jobs to start")
    spec = TrainSpec.model_validate(
        {"cluster": lab.cluster, "domain_size": 4, "budget": {"max_unavailable": 4},
         "drain": {"max_wait": "30s"}, "targets": ON_TARGET}
    )  # fmt: skip
    await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    drained: set[str] = set()
    async with build_worker(dev_env.client, path, task_queue):
        handle = await dev_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec),
            id=f"train-lab-rests-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        try:
            deadline, rested_at = time.monotonic() + SETTLE_SECONDS, None
            while time.monotonic() < deadline:
                table = await asyncio.to_thread(node_table, lab)
                drained |= {n for n, (_, r, _) in table.items() if r.startswith("trainctl")}
                if rested_at is None and (await handle.query(ClusterTrain.status)).resting:
                    rested_at = time.monotonic()
                    deadline = rested_at + REST_SECONDS
                await asyncio.sleep(1)
            st = await handle.query(ClusterTrain.status)
            await handle.execute_update(ClusterTrain.stop, ControlRequest(reason="test over"))
            await asyncio.wait_for(handle.result(), 60)
        finally:
            await terminate(dev_env, handle.id)
            await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    assert not drained, drained
    assert st.resting and st.cycles_completed == 1 and st.jobs_interrupted == 0, st
    assert st.checked_total == len(lab.nodes) and st.visits_total == 0, st
    assert set(running()) == {str(j) for j in jobs}
    assert all(n == 0 for n in _restarts(lab, jobs).values())
    fleet = open_backend(path)
    try:
        report = audit(fleet)
        kinds = [e.kind for _, e, _ in fleet.records()]
    finally:
        fleet.close()  # type: ignore[attr-defined]
    assert report.ok, report.violations[:3]
    assert "job_interrupted" not in kinds and kinds.count("checked") == len(lab.nodes)
