"""Quiet hours on a real Slurm cluster: a quiet job is requeued only once they end, unless its
node's deadline comes first, which the record then says.

``trainctl lab slurm up --nodes 2`` and two real ``sbatch --requeue`` jobs, one a node. The
train (a 20 s ``max_wait``, ``cycle_target: 75s`` from the fleet's start, nodes never visited)
takes both nodes at once. ``ckpt=10s quiet_until=<in 45 s>`` is kept past the drain deadline
to the end of its quiet hours; ``quiet_until=<in an hour>`` is requeued at the nodes' deadline
(fleet start plus 75 s) with a ``quiet_job_evicted`` event. A malformed ``quiet_until=`` word
leaves a ``job_comment_ignored`` event and nothing else.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import open_backend
from orchestrator.lab.slurm import LabInfo, lab_down
from tests.e2e import audit_ok, terminate, wait_for
from tests.test_slurm_e2e import TARGETS, slurm
from tests.test_slurm_ops import init_fleet, lab_up
from workflows.cluster_train import ClusterTrain

MAX_WAIT_S = 20.0
CYCLE_TARGET_S = 75.0
QUIET_S = 45.0
LIMIT_MIN = 10


@pytest.fixture
def lab2(tmp_home: Path) -> Iterator[LabInfo]:
    """A lab of two nodes; down whatever happened."""
    try:
        yield lab_up(tmp_home, "--nodes", "2")
    finally:
        lab_down(tmp_home)


def _instant(seconds: float) -> str:
    """The UTC instant ``seconds`` from now, as a job's owner writes it."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _submit(lab: LabInfo, comment: str) -> int:
    out = slurm(
        lab, "sbatch", "--parsable", "--requeue", "-N1", f"-t{LIMIT_MIN}",
        f"--comment={comment}", "-o/dev/null", f"--chdir={Path(lab.slurm_conf).parent}",
        f"--wrap=sleep {LIMIT_MIN * 60 - 30}",
    )  # fmt: skip
    return int(out.strip().split(";")[0])


def _events(path: Path) -> list[Any]:
    fleet = open_backend(path)
    try:
        return [e for _, e, _ in fleet.records()]
    finally:
        fleet.close()  # type: ignore[attr-defined]


def _running(lab: LabInfo) -> int:
    return len(slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i").split())


async def test_a_quiet_job_on_slurm_is_kept_to_its_end_or_its_node_deadline(
    dev_env, tmp_home, task_queue, lab2
):
    """The job quiet for 45 s is requeued after its quiet hours, past the 20 s drain deadline;
    the one quiet for an hour at its node's deadline, which the record says."""
    lab = lab2
    path = init_fleet(lab)
    fleet = open_backend(path)
    anchor = fleet.anchor_wall.timestamp()  # type: ignore[attr-defined]
    fleet.close()  # type: ignore[attr-defined]
    short_text = _instant(QUIET_S)
    short_until = datetime.fromisoformat(short_text.replace("Z", "+00:00")).timestamp()
    short = _submit(lab, f"ckpt=10s quiet_until=2026-12-24 quiet_until={short_text}")
    long = _submit(lab, f"quiet_until={_instant(3600)}")
    await wait_for(lambda: _running(lab) == 2, "the jobs to start")
    spec = TrainSpec.model_validate(
        {"cluster": lab.cluster, "domain_size": 2, "budget": {"max_unavailable": 2},
         "drain": {"max_wait": f"{MAX_WAIT_S:.0f}s"}, "cycle_target": f"{CYCLE_TARGET_S:.0f}s",
         "targets": TARGETS}
    )  # fmt: skip
    await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    done = lambda: sum(e.kind == "job_interrupted" for e in _events(path)) >= 2  # noqa: E731
    async with build_worker(dev_env.client, path, task_queue):
        handle = await dev_env.client.start_workflow(
            ClusterTrain.run, TrainInput(spec=spec),
            id=f"train-lab-quiet-{uuid.uuid4().hex[:8]}", task_queue=task_queue,
        )  # fmt: skip
        try:
            await wait_for(lambda: asyncio.to_thread(done), "both jobs evicted", 150, every=1)
        finally:
            await terminate(dev_env, handle.id)
            await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    events = _events(path)
    evicted = {e.detail["job"]: e for e in events if e.kind == "job_interrupted"}
    forced = [e.detail for e in events if e.kind == "quiet_job_evicted"]
    cordoned = min(
        e.t for e in events if e.kind == "host_state" and e.detail.get("after") == "cordoned"
    )
    short_at = anchor + evicted[short].t * 3600
    long_at = anchor + evicted[long].t * 3600
    print(f"short: {short_at - short_until:+.1f}s after its quiet hours, "
          f"{(evicted[short].t - cordoned) * 3600:.1f}s after the cordon; "
          f"long: {long_at - anchor - CYCLE_TARGET_S:+.1f}s after its node deadline")  # fmt: skip
    assert short_at >= short_until - 0.01  # never inside its quiet hours
    assert (evicted[short].t - cordoned) * 3600 > MAX_WAIT_S  # past the drain's own deadline
    assert anchor + CYCLE_TARGET_S - 1.0 <= long_at < anchor + 3000
    assert [d["job"] for d in forced] == [long], forced
    ignored = [e.detail for e in events if e.kind == "job_comment_ignored"]
    assert ignored and {d["job"] for d in ignored} == {short}
    assert ignored[0]["ignored"] == ["quiet_until=2026-12-24"]
    audit_ok(path)
