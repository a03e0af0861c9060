"""Piggybacking on a real Slurm (issue 29, #4): a job's end gives its due nodes to the train.

A lab of 8 nodes runs real ``sbatch --requeue`` jobs, with one more queued behind them so Slurm
would place it on the first nodes that free. A train (domain 2, budget 5) waits for the
checkpoint of the job on its first domain; meanwhile a short job on two more nodes ends.
trainctl's maintenance reservation holds those nodes (the due nodes of the next domain), so the
queued job does not land there, and the next session takes them for the train, recorded as
piggybacked, with no eviction (without the reservation the queued job took them and was
evicted: 4 evictions instead of 3).
An operator drains a node during the run: it keeps Slurm's state and the operator's reason, and
trainctl never maintains or resumes it. What is asserted comes from Slurm (``sinfo``, the job
completion log) and from trainctl's record and audit.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.backend import PiggybackClaim
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import fleet_path, open_backend
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.backend import SlurmCluster
from orchestrator.fleet.slurm.commands import SlurmJob, SlurmNode, SlurmPermissionDenied
from orchestrator.fleet.slurm.config import SlurmBackendConfig
from orchestrator.fleet.slurm.piggyback import RESERVATION
from orchestrator.lab.slurm import LabInfo, lab_down, lab_versions
from tests.e2e import audit_ok, terminate, wait_for
from tests.test_slurm_e2e import node_table, slurm
from tests.test_slurm_ops import lab_up
from workflows.cluster_train import ClusterTrain

TARGETS = {"os": "6.8.0-45"}
OPERATOR_NODE = "h04"
OPERATOR_REASON = "operator: ECC errors, ticket 5150"
#: The short job's run: it ends while the train drains its second domain (20 s drain wait).
SHORT_SECONDS = 18


@pytest.fixture
def lab8(tmp_home: Path) -> Iterator[LabInfo]:
    try:
        yield lab_up(tmp_home)
    finally:
        lab_down(tmp_home)


def sbatch(lab: LabInfo, nodes: int, seconds: int, comment: str, limit_minutes: int = 0) -> int:
    out = slurm(
        lab, "sbatch", "--parsable", "--requeue", f"-N{nodes}",
        f"-t{limit_minutes or seconds // 60 + 1}",
        f"--comment={comment}", "-o/dev/null", f"--chdir={Path(lab.slurm_conf).parent}",
        f"--wrap=sleep {seconds}",
    )  # fmt: skip
    return int(out.strip().split(";")[0])


def init_fleet(lab: LabInfo, reservation: bool = True) -> None:
    if not reservation:
        with open(lab.backend_config, "a") as f:
            f.write("piggyback_reservation: false\n")
    cli = CliRunner().invoke(
        cli_main,
        [
            "fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
            "--backend-config", lab.backend_config, "--json",
        ],
    )  # fmt: skip
    assert cli.exit_code == 0, cli.output


def events(path: Path) -> list[Any]:
    fleet = open_backend(path)
    try:
        return [e for _, e, _ in fleet.records()]
    finally:
        fleet.close()  # type: ignore[attr-defined]


async def run_piggyback_train(dev_env, tmp_home, task_queue, lab, reservation=True):
    """The scenario: (the record's events, the short job's nodes, the queued job)."""
    running = lambda: slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i").split()  # noqa: E731
    # A job checkpointing every 20 s (the first domain: the train waits for its checkpoint),
    # long ones it evicts, and a short one that ends while the train waits (its time limit
    # says 10 minutes: the planner does not expect its end); then a queued job that Slurm
    # would put on the first two nodes to free.
    long = [sbatch(lab, 2, 600, "ckpt=20s"), sbatch(lab, 2, 600, "")]
    short = sbatch(lab, 2, SHORT_SECONDS, "", limit_minutes=10)
    long.append(sbatch(lab, 2, 600, ""))
    await wait_for(lambda: len(running()) == 4, "the jobs to start")
    queued = [sbatch(lab, 2, 600, "")]
    hostlist = slurm(lab, "squeue", "-h", "-j", str(short), "-o", "%N").strip()
    short_nodes = slurm(lab, "scontrol", "show", "hostnames", hostlist).split()
    init_fleet(lab, reservation)
    path = fleet_path(tmp_home)
    spec = TrainSpec.model_validate(
        {
            "cluster": lab.cluster,
            "domain_size": 2,
            "budget": {"max_unavailable": 5},
            "drain": {"max_wait": "20s"},
            "targets": TARGETS,
            "stop_after_cycles": 1,
        }
    )
    await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    async with build_worker(dev_env.client, path, task_queue):
        handle = await dev_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec),
            id=f"train-pgb-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        try:
            await wait_for(lambda: len(lab_versions(tmp_home)) >= 1, "a first node updated", 90)
            slurm(
                lab, "scontrol", "update", f"nodename={OPERATOR_NODE}", "state=drain",
                f"reason={OPERATOR_REASON}",
            )  # fmt: skip
            final = await asyncio.wait_for(handle.result(), 170)
        finally:
            await terminate(dev_env, handle.id)
            await terminate(dev_env, arbiter_workflow_id(lab.cluster, task_queue))
    assert final.cycles_completed >= 1, final
    del long
    return events(path), short_nodes, queued


async def test_a_job_ending_on_due_nodes_gives_them_to_the_train(
    dev_env, tmp_home, task_queue, lab8
):
    lab = lab8
    evs, short_nodes, queued = await run_piggyback_train(dev_env, tmp_home, task_queue, lab)
    path = fleet_path(tmp_home)
    piggy = [e for e in evs if e.kind == "host_state" and e.detail.get("piggyback")]
    interrupted = [e for e in evs if e.kind == "job_interrupted"]
    for e in evs:
        print(round((e.t - evs[0].t) * 3600, 1), e.actor, e.kind, e.host, e.detail)
    print("piggybacked", [e.host for e in piggy], "interrupted", [e.detail for e in interrupted])
    # The short job's nodes went to the train as its end freed them: no eviction of them.
    assert sorted(e.host for e in piggy) == sorted(short_nodes), (piggy, short_nodes)
    assert not [e for e in interrupted if set(e.detail["hosts"]) & set(short_nodes)]
    # The queued job did not start on them and get evicted (without the reservation it did:
    # 4 evictions instead of 3).
    assert not [e for e in interrupted if e.detail["job"] in queued], interrupted
    reserved = [e for e in evs if e.kind == "reserved"]
    assert any(set(short_nodes) <= set(e.detail["nodes"]) for e in reserved), reserved
    # Every node but the operator's carries the new versions; the operator's is untouched.
    installed = lab_versions(tmp_home)
    assert sorted(installed) == [n for n in lab.nodes if n != OPERATOR_NODE], installed
    table = node_table(lab)
    state, reason, _ = table[OPERATOR_NODE]
    assert "drain" in state and reason == OPERATOR_REASON, table[OPERATOR_NODE]
    assert not [n for n, (_, r, _) in table.items() if r.startswith("trainctl:")], table
    assert not [e for e in evs if e.host == OPERATOR_NODE and e.actor not in ("slurm",)], [
        e for e in evs if e.host == OPERATOR_NODE
    ]
    fleet = open_backend(path)
    try:
        op = fleet.peek(lab.cluster).host(OPERATOR_NODE)
    finally:
        fleet.close()  # type: ignore[attr-defined]
    assert op.state == "quarantined" and OPERATOR_REASON in op.reason, op
    # The reservation is gone once the train withdrew its claim.
    assert "trainctl_piggyback" not in slurm(lab, "scontrol", "show", "reservation")
    audit_ok(path)


class FakeSlurm:
    """Just enough of ``SlurmCommands`` for a session: nodes idle or running the given jobs."""

    def __init__(self, jobs: dict[int, tuple[str, ...]], deny: bool = False) -> None:
        self.jobs_on, self.deny = jobs, deny
        self.calls: list[tuple[str, ...]] = []

    def nodes(self) -> list[SlurmNode]:
        busy = {n for ns in self.jobs_on.values() for n in ns}
        drained = {c[1] for c in self.calls if c[0] == "drain"}
        return [
            SlurmNode(n, "allocated" if n in busy else "idle",
                      frozenset({"DRAIN"} if n in drained else ()), "", (), ("main",))
            for n in ("h1", "h2", "h3", "h4")
        ]  # fmt: skip

    def jobs(self) -> list[SlurmJob]:
        now = int(time.time())
        return [
            SlurmJob(j, "RUNNING", ns, now - 60, now + 60 * j, "", True)
            for j, ns in self.jobs_on.items()
        ]

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            if self.deny and name == "create_reservation":
                raise SlurmPermissionDenied("Access/permission denied", field="slurm")
            self.calls.append((name, *map(str, args)))

        return call


def session(cmd: FakeSlurm, hosts: list[HostRec], state: dict[str, Any]) -> SlurmCluster:
    b = SlurmCluster(
        "lab", time.time() / 3600, 0.0, hosts, state, cmd,  # type: ignore[arg-type]
        SlurmBackendConfig(), True,
    )  # fmt: skip
    b.sync()
    return b


def test_freed_due_nodes_are_taken_for_the_claim_and_the_next_domain_reserved() -> None:
    """Without a lab: the reservation holds the job that ends first (whole, within the room);
    when its end frees the nodes, the next session cordons them as piggybacked and drops the
    reservation; a site that refuses reservations gets piggybacking without one."""
    hosts = [HostRec(n, "z", "r", "in_service", {}) for n in ("h1", "h2", "h3", "h4")]
    state: dict[str, Any] = {}
    cmd = FakeSlurm({1: ("h3", "h4"), 9: ("h1",)})
    b = session(cmd, hosts, state)
    claim = PiggybackClaim("train-lab", 0.0, max_held=2, limit=2, until_hours=b.now + 2)
    b.set_piggyback(claim)
    assert ("create_reservation", RESERVATION, "['h3', 'h4']", "120") in cmd.calls, cmd.calls
    assert state["reserved"] == ["h3", "h4"]
    del cmd.jobs_on[1]  # job 1 ended: its nodes idle, in the reservation
    b = session(cmd, [b.hosts[n] for n in b.order], state)
    taken = {n for n, h in b.hosts.items() if h.state == "cordoned"}
    assert taken == {"h3", "h4"}, b.hosts
    assert all(b.hosts[n].reason.endswith("(piggybacked: its job ended or failed)") for n in taken)
    assert ("delete_reservation", RESERVATION) in cmd.calls and state["reserved"] == []
    assert [e.detail.get("piggyback") for e in b.events if e.kind == "host_state"] == [True] * 2
    denied = FakeSlurm({1: ("h3", "h4")}, deny=True)
    b = session(denied, [HostRec(n, "z", "r", "in_service", {}) for n in b.order], {})
    b.set_piggyback(claim)  # refused: logged, the session goes on
    assert [e.kind for e in b.events] == ["reservation_refused"], b.events
