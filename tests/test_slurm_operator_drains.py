"""An operator's drain or down of a node trainctl holds is never undone, at any step of its visit.

``trainctl lab slurm up --nodes 4`` and a real train through Temporal's dev server. While the
train holds all four nodes, an operator takes each of them in Slurm with a reason of their own:
h01 drained and h02 downed while trainctl waits for their jobs (before the install), h03 drained
and h04 downed while their first install hook runs (after the install started). trainctl must
do nothing more to them (no eviction, no further hook, no reboot, no resume), record each
hand-over with the operator's reason, count the nodes out of service and their visits as not
done. What is asserted comes from Slurm (``sinfo``), the hooks' own log, the train's status and
trainctl's record and audit.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.execution.install import install_hosts
from orchestrator.execution.settle import verify_and_settle
from orchestrator.fleet.slurm import SlurmFleet
from orchestrator.fleet.slurm.config import load_backend_config
from orchestrator.lab.slurm import LabInfo, lab_versions
from tests.e2e import wait_for
from tests.test_slurm_e2e import node_table, slurm
from tests.test_slurm_hook_limits import hook_calls, init_fleet, lab_cli, read_record, train_on

TARGETS = {"os": "6.8.0-45", "bios": "3.2"}
#: node -> (what the operator does in Slurm, their reason)
OPERATOR = {
    "h01": ("drain", "operator: disk INC-7"),
    "h02": ("down", "operator: dead PSU"),
    "h03": ("drain", "operator: PSU INC-3"),
    "h04": ("down", "operator: fan INC-9"),
}


@pytest.fixture
def lab4(tmp_home: Path) -> Iterator[LabInfo]:
    yield from lab_cli(tmp_home, 4)


def site_hook(tmp: Path, lab: LabInfo) -> Path:
    """The lab's install hook, which on h03 and h04 first says it started, then waits (up to
    30 s) until the test lets it go on."""
    lab_hook = Path(lab.slurm_conf).parent / "hook.sh"
    script = tmp / "site-hook.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $2" >> {tmp}/hook-calls.txt\n'
        'case "$1" in h03|h04)\n'
        f"  touch {tmp}/started.$1; i=0\n"
        f"  while [ ! -e {tmp}/go.$1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done ;;\n"
        "esac\n"
        f'exec {lab_hook} "$@"\n'
    )
    script.chmod(0o755)
    return script


def take(lab: LabInfo, node: str) -> None:
    """What the operator does to ``node`` in Slurm."""
    state, reason = OPERATOR[node]
    slurm(lab, "scontrol", "update", f"nodename={node}", f"state={state}", f"reason={reason}")


def slurm_state(lab: LabInfo, node: str) -> str:
    """The node's state as ``scontrol show node`` says it (``DOWN+DRAIN``, ``IDLE+DRAIN``)."""
    m = re.search(r"\bState=(\S+)", slurm(lab, "scontrol", "show", "node", node))
    return m.group(1) if m else ""


def held_by_trainctl(lab: LabInfo, nodes: list[str]) -> bool:
    table = node_table(lab)
    return all(table[n][1].startswith("trainctl:") for n in nodes)


def _job_on(lab: LabInfo, node: str, tmp: Path) -> int:
    """A requeueable job on ``node`` that outlives the train's drain deadline."""
    out = slurm(lab, "sbatch", "--parsable", "--requeue", "-N1", f"-w{node}", "-t5",
                "-o/dev/null", f"--chdir={tmp}", "--wrap=sleep 290")  # fmt: skip
    return int(out.strip().split(";")[0])


async def _operate(lab: LabInfo, tmp: Path) -> None:
    """Take h01 and h02 once trainctl drained them for their jobs, then h03 and h04 while
    their hooks run (each hook then goes on)."""
    await wait_for(lambda: held_by_trainctl(lab, ["h01", "h02"]), "h01 and h02 cordoned", 60)
    for node in ("h01", "h02"):
        await asyncio.to_thread(take, lab, node)
    for node in ("h03", "h04"):
        await wait_for(lambda node=node: (tmp / f"started.{node}").exists(), f"{node}'s hook", 90)
        await asyncio.to_thread(take, lab, node)
        (tmp / f"go.{node}").touch()


async def test_an_operators_drain_or_down_is_kept_before_and_after_the_install(
    dev_env, tmp_home, task_queue, lab4
):
    """Drained and downed before the install (h01, h02) and after it started (h03, h04): no
    eviction, no further hook, no reboot, no resume; Slurm still shows each operator's drain
    and reason; the record has a hand-over per node with that reason and all four out of
    service, held by nobody; the train visited none and lists each as lost with the reason;
    the audit holds."""
    lab = lab4
    path = init_fleet(tmp_home, lab, site_hook(tmp_home, lab))
    for node in ("h01", "h02"):
        _job_on(lab, node, tmp_home)
    running = lambda: slurm(lab, "squeue", "-h", "-t", "R", "-o", "%i").split()  # noqa: E731
    await wait_for(lambda: len(running()) == 2, "the jobs to start")
    spec = TrainSpec.model_validate(
        {"cluster": lab.cluster, "domain_size": 4, "budget": {"max_unavailable": 4},
         "drain": {"max_wait": "40s"}, "targets": TARGETS, "stop_after_cycles": 1}
    )  # fmt: skip
    async with train_on(dev_env, path, task_queue, spec) as handle:
        await _operate(lab, tmp_home)
        final = await asyncio.wait_for(handle.result(), 120)

    table = node_table(lab)
    for node, (_, reason) in OPERATOR.items():
        # Drained in Slurm with the operator's reason (a downed node whose slurmd answers is
        # idle again by the lab's ReturnToService=2, still drained: Slurm's doing, not ours).
        state = slurm_state(lab, node)
        assert "DRAIN" in state and table[node][1] == reason, (node, state, table[node])
    calls = hook_calls(tmp_home)
    assert sorted(c.split()[0] for c in calls) == ["h03", "h04"], calls  # one hook each, no more
    assert not lab_versions(tmp_home).keys() - {"h03", "h04"}, lab_versions(tmp_home)
    assert final.visits_total == 0 and final.jobs_interrupted == 0, final
    lost = dict(final.recent_failures)
    assert all(OPERATOR[n][1] in lost.get(n, "") for n in OPERATOR), final.recent_failures
    report, hosts, evs = read_record(path, lab.cluster)
    assert report.ok, report.violations[:3]
    for node, (_, reason) in OPERATOR.items():
        h = hosts[node]
        assert h.state in ("quarantined", "in_repair") and reason in h.reason, h
        assert h.owner == "", h
    handed = {e.host: e.detail for e in evs if e.kind == "handed_over"}
    assert sorted(handed) == sorted(OPERATOR), handed
    owner = f"train-{lab.cluster}"
    for node, (_, reason) in OPERATOR.items():
        assert handed[node]["reason"] == reason and handed[node]["owner"] == owner, handed
    done = [(e.kind, e.host) for e in evs if e.kind in ("rebooted", "job_interrupted", "verified")]
    assert not done, done


@pytest.fixture
def lab2(tmp_home: Path) -> Iterator[LabInfo]:
    yield from lab_cli(tmp_home, 2)


def test_an_operators_drain_while_trainctl_reboots_the_node_is_kept(tmp_home, lab2):
    """Drained by an operator while verification waits for trainctl's reboot, in the same
    session: the node is handed over, neither returned nor quarantined, no reboot is asked
    again, and Slurm keeps the operator's drain and reason."""
    lab = lab2
    config = load_backend_config(Path(lab.backend_config))
    fleet = SlurmFleet.create(tmp_home / "fleet.db", Path(lab.slurm_conf), config)
    try:
        with fleet.cluster(lab.cluster) as b:
            assert b.cordon("h01", "train-lab", "train-lab", limit=2)
            upd = install_hosts(b, "train-lab", {"h01": {"os": TARGETS["os"]}})
            assert upd.updated == ["h01"], upd
        operator = threading.Timer(0.5, take, (lab, "h01"))
        operator.start()
        with fleet.cluster(lab.cluster) as b:
            out = verify_and_settle(b, "train-lab", ["h01"], {"os": TARGETS["os"]}, visit=True)
            h = b.host("h01")
        operator.join()
        evs = [e for _, e, _ in fleet.records()]
    finally:
        fleet.close()
    assert not out.returned and not out.quarantined, out
    assert (h.state, h.owner) == ("quarantined", "") and OPERATOR["h01"][1] in h.reason, h
    assert [e.detail["reason"] for e in evs if e.kind == "handed_over"] == [OPERATOR["h01"][1]]
    steps = [e.detail.get("after", e.kind) for e in evs if e.host == "h01"]
    assert steps[-4:] == ["verifying", "handed_over", "quarantined", "verified"], steps
    assert not [e for e in evs if e.kind in ("reboot_asked_again", "health_checked")], evs
    assert "DRAIN" in slurm_state(lab, "h01")
    # the operator's reason is kept; slurmctld may add its own note when the reboot trainctl
    # asked before the handover goes out after the operator's drain (" : reboot issued")
    assert node_table(lab)["h01"][1].startswith(OPERATOR["h01"][1])
