"""A train on a real Slurm lab over hooks that hang, crash or print bytes that are not UTF-8.

``trainctl lab slurm up --nodes 4``, a real train through Temporal's dev server, and a site hook
that misbehaves per node: on h01 it hangs (waiting on two ``sleep``s), on h02 the kernel kills
it while a child of it still runs, on h03 it installs but prints bytes that are not UTF-8, on
h04 it behaves. Each hook run is a session of its own, killed whole at its 2 s timeout: a
sampler reading ``/proc`` every 50 ms counts the sessions of the hanging hook alive at once. A
timed-out or crashed hook is a failed attempt like any other, so after three the node is
quarantined with why, in Slurm (``sinfo``), in ``train status`` and in ``fleet host``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.cli import main as cli_main
from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.audit_types import AuditReport
from orchestrator.contracts.backend import RecordEntry as Event
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.fleet import fleet_path, open_backend
from orchestrator.fleet.sim_records import HostRec
from orchestrator.lab.slurm import LabInfo, lab_down, lab_versions
from tests.cli_inproc import cli
from tests.e2e import terminate
from tests.test_slurm_e2e import node_table
from tests.test_slurm_hook_runs import gone, marker
from workflows.cluster_train import ClusterTrain

TARGETS = {"os": "6.8.0-45"}
TIMEOUT_SECONDS = 2


def lab_cli(home: Path, nodes: int) -> Iterator[LabInfo]:
    """``trainctl lab slurm up --nodes N --json``, and ``down`` whatever the test did."""
    try:
        up = CliRunner().invoke(cli_main, ["lab", "slurm", "up", "--nodes", str(nodes), "--json"])
        assert up.exit_code == 0, up.output
        info = json.loads(up.stdout)
        info.pop("already_running")
        yield LabInfo(**info)
    finally:
        down = CliRunner().invoke(cli_main, ["lab", "slurm", "down", "--json"])
        assert down.exit_code == 0, down.output
        lab_down(home)


@pytest.fixture
def lab4(tmp_home: Path) -> Iterator[LabInfo]:
    yield from lab_cli(tmp_home, 4)


def sessions(mark: str) -> set[int]:
    """Sessions of the live (not zombie) processes whose command line holds ``mark``."""
    out = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if mark in cmd and fields[0] != "Z":
            out.add(int(fields[3]))  # the session id (each hook run has its own)
    return out


class CopySampler(threading.Thread):
    """Counts the copies of a hook alive at once (its sessions), until stopped."""

    def __init__(self, mark: str) -> None:
        super().__init__(daemon=True)
        self.mark = mark
        self.stop = threading.Event()
        self.most = 0
        self.seen: set[int] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            now = sessions(self.mark)
            self.most = max(self.most, len(now))
            self.seen |= now
            self.stop.wait(0.05)


def site_hook(tmp: Path, lab: LabInfo, hang: str, crash: str) -> Path:
    """The test's install hook: misbehaves on h01-h03, then does the lab's install."""
    calls = tmp / "hook-calls.txt"
    lab_hook = Path(lab.slurm_conf).parent / "hook.sh"
    script = tmp / "site-hook.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $2" >> {calls}\n'
        'case "$1" in\n'
        f"  h01) sleep {hang} & sleep {hang}; exit 0 ;;\n"
        f"  h02) sleep {crash} & kill -KILL $$ ;;\n"
        "  h03) printf '\\377\\376 firmware says hi\\n' ;;\n"
        "esac\n"
        f'exec {lab_hook} "$@"\n'
    )
    script.chmod(0o755)
    return script


def hook_calls(tmp: Path) -> list[str]:
    """``node component`` of each hook run, in order."""
    path = tmp / "hook-calls.txt"
    return path.read_text().split("\n")[:-1] if path.exists() else []


def init_fleet(home: Path, lab: LabInfo, hook: Path, **config: object) -> Path:
    """``fleet init --backend slurm`` with the lab's backend config, its install hook ``hook``
    (and ``config`` over the rest); the fleet's store."""
    cfg = yaml.safe_load(Path(lab.backend_config).read_text())
    cfg["hooks"] = {"*": f"{hook} {{node}} {{component}} {{version}}"}
    cfg.update(config)
    (home / "backend.yaml").write_text(yaml.safe_dump(cfg))
    init = CliRunner().invoke(
        cli_main,
        ["fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
         "--backend-config", str(home / "backend.yaml"), "--json"],
    )  # fmt: skip
    assert init.exit_code == 0, init.output
    return fleet_path(home)


@contextlib.asynccontextmanager
async def train_on(
    env: WorkflowEnvironment, path: Path, task_queue: str, spec: TrainSpec
) -> AsyncIterator[WorkflowHandle[Any, TrainStatus]]:
    """A worker and a train on the lab's cluster; both (and its arbiter) gone afterwards."""
    arbiter = arbiter_workflow_id(spec.cluster, task_queue)
    await terminate(env, arbiter)
    async with build_worker(env.client, path, task_queue):
        handle = await env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec),
            id=f"train-lab-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        try:
            yield handle
        finally:
            await terminate(env, handle.id)
            await terminate(env, arbiter)


def read_record(path: Path, cluster: str) -> tuple[AuditReport, dict[str, HostRec], list[Event]]:
    """The audit of the fleet's record, its hosts and its entries."""
    fleet = open_backend(path)
    try:
        b = fleet.peek(cluster)
        hosts = {n: b.host(n) for n in b.host_names()}
        return audit(fleet), hosts, [e for _, e, _ in fleet.records()]
    finally:
        fleet.close()  # type: ignore[attr-defined]


def quarantined_after(evs: list[Event], node: str) -> float:
    """Seconds from the start of the node's first install to its quarantine (each entry
    carries its session's start: the install's, then the quarantine's)."""
    first = next(e for e in evs if e.kind == "update_failed" and e.host == node)
    out = next(
        e
        for e in evs
        if e.kind == "host_state" and e.host == node and e.detail["after"] == "quarantined"
    )
    return (out.t - first.t) * 3600


async def test_hooks_that_hang_or_crash_end_quarantined_and_never_pile_up(
    dev_env, tmp_home, task_queue, lab4, monkeypatch
):
    """h01's hanging hook runs 3 times, never 2 copies at once, none left after; h02's crashed
    hook 3 times, its child killed; both nodes end quarantined with why ("timed out",
    "crashed") in sinfo, train status and fleet host; h03's install despite its output and
    h04's are recorded and the nodes serve; the audit holds."""
    lab = lab4
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    hang, crash = marker(), marker()
    hook = site_hook(tmp_home, lab, hang, crash)
    path = init_fleet(tmp_home, lab, hook, command_timeout_seconds=TIMEOUT_SECONDS)
    spec = TrainSpec.model_validate(
        {"cluster": lab.cluster, "domain_size": 4, "budget": {"max_unavailable": 4},
         "targets": TARGETS, "stop_after_cycles": 1}
    )  # fmt: skip
    sampler = CopySampler(hang)
    sampler.start()
    try:
        async with train_on(dev_env, path, task_queue, spec) as handle:
            final = await asyncio.wait_for(handle.result(), 180)
            code, shown, err = await cli("fleet", "host", "h01", "--json")
    finally:
        sampler.stop.set()
        sampler.join(5)

    calls = hook_calls(tmp_home)
    assert calls.count("h01 os") == 3 and calls.count("h02 os") == 3, calls
    assert sampler.most == 1 and len(sampler.seen) == 3, (sampler.most, sampler.seen)
    assert gone(hang) and gone(crash)
    table = node_table(lab)
    for node, why in (("h01", "timed out after 2s"), ("h02", "crashed: killed by SIGKILL")):
        state, reason, _ = table[node]
        assert "drain" in state, table[node]
        assert reason.startswith("trainctl:quarantine update failed: "), table[node]
        assert why in reason, table[node]
    assert final.cycles_completed == 1 and final.visits_total == 2, final
    failures = dict(final.recent_failures)
    assert "timed out after 2s" in failures["h01"], final.recent_failures
    assert "crashed: killed by SIGKILL" in failures["h02"], final.recent_failures
    assert code == 0, (shown, err)
    assert shown["state"] == "quarantined" and "timed out after 2s" in shown["reason"], shown
    installed = lab_versions(tmp_home)
    assert sorted(installed) == ["h03", "h04"] and installed["h03"] == TARGETS, installed
    report, hosts, evs = read_record(path, lab.cluster)
    assert report.ok, report.violations[:3]
    assert [hosts[n].state for n in ("h03", "h04")] == ["in_service", "in_service"]
    assert hosts["h03"].versions["os"] == TARGETS["os"]
    timed = [e for e in evs if e.kind == "update_failed" and e.host == "h01"]
    assert len(timed) == 3 and all(not e.detail["permanent"] for e in timed), timed
    took = quarantined_after(evs, "h01")
    print(f"h01 quarantined {took:.1f}s after its install began; {sampler.most} copy at once")
    assert took < 20, took
    assert any(e.kind == "updated" and e.host == "h03" for e in evs)
