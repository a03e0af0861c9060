"""``trainctl demo``: a whole maintenance train on one machine, from an empty directory.

It builds a fresh simulated fleet under TRAINCTL_HOME, starts the embedded Temporal server (with
its UI) and a worker in this process, launches a train on ``c00`` (or on each of the first
``clusters`` clusters, side by side) and follows its progress. With ``until_cycle_complete`` each
train stops after one full visit cycle, then the demo audits the fleet's event log, so the
summary's figures come from the log rather than from the trains' own word
(``clusters.<name>.fleet_hours`` is each cluster's fleet time at its end).

It drives the train through ``orchestrator.train.client`` like any other client; showing
anything to a person (the UI's address, a progress bar) is left to the caller's callbacks, so
``orchestrator.app.cli.demo`` is the only command-line piece of the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from temporalio.client import Client

from orchestrator.app.temporal_server import DevServer, DevServerConfig
from orchestrator.app.worker import TASK_QUEUE, build_worker, heartbeat
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.paths import trainctl_home
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainStatus
from orchestrator.fleet import create_fleet, fleet_path, open_backend
from orchestrator.fleet.presets import Preset, get_preset
from orchestrator.fleet.store_url import StoreRef
from orchestrator.infra.client import connect
from orchestrator.infra.connection import ConnectionOptions
from orchestrator.planning.rack_plan import rack_fits_budget
from orchestrator.train.client import control_train, start_train, train_result, train_status
from orchestrator.train.status import visit_figures

DEMO_TARGETS = {"os": "6.8.0-45", "bios": "3.2", "bmc": "1.9.0", "nic_firmware": "28.41.1000"}
DEMO_DOMAIN_SIZE = {"small": 8, "meta-24k": 64, "meta-600k": 64}


def free_port(preferred: int) -> int:
    """``preferred`` if nothing listens there, else any free port."""
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise RuntimeError("no free port")


class Interrupt:
    """SIGINT and SIGTERM stop the demo the same way: the first asks each train to stop (it
    hands its hosts back and records its close), after which the demo audits and returns its
    summary as usual; a second cancels the demo at once."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.signal: str | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig, main)

    def _on_signal(self, sig: signal.Signals, main: asyncio.Task[Any] | None) -> None:
        if self.stop.is_set():
            if main is not None:
                main.cancel()
            return
        self.signal = sig.name
        self.stop.set()


def demo_spec(
    preset: str,
    domain_size: int | None,
    budget: str,
    until_cycle: bool,
    cluster: str = "c00",
    targets: dict[str, str] | None = None,
) -> TrainSpec:
    return TrainSpec.model_validate(
        {
            "cluster": cluster,
            "campaign": "demo",
            "domain_size": domain_size or DEMO_DOMAIN_SIZE.get(preset, 8),
            "budget": {"max_unavailable": budget},
            "targets": targets or DEMO_TARGETS,
            "drain": {"max_wait": "4h"},
            "halt_after_failures": 5,
            "stop_after_cycles": 1 if until_cycle else None,
        }
    )


async def run_demo(
    preset: str,
    speed: float,
    seed: int,
    until_cycle: bool,
    domain_size: int | None,
    budget: str,
    port: int,
    ui_port: int,
    on_ui: Callable[[str], None] = lambda url: None,
    on_status: Callable[[TrainStatus], None] = lambda status: None,
    clusters: int = 1,
    targets: dict[str, str] | None = None,
    interrupt: Interrupt | None = None,
) -> dict[str, Any]:
    """Run the demo and return its summary.

    ``on_ui`` gets the (first) train's page in the Temporal UI once the server is up;
    ``on_status`` gets every status of every train while they run. SIGINT and SIGTERM stop the
    trains and end the demo with its summary (``interrupted`` names the signal).
    """
    started = time.monotonic()
    if interrupt is None:
        interrupt = Interrupt()
        interrupt.install()
    shape = get_preset(preset)
    specs = _demo_specs(preset, shape, clusters, domain_size, budget, until_cycle, targets)
    spec = specs[0]
    path = fleet_path()
    create_fleet(path, shape, seed, speed).close()
    home = trainctl_home()
    db = home / "demo-temporal.db"
    db.unlink(missing_ok=True)
    config = DevServerConfig(port=free_port(port), ui_port=free_port(ui_port), db_filename=db)
    async with DevServer(config) as server:
        # The embedded server: the user's profile and TEMPORAL_* describe another cluster.
        client = await connect(options=ConnectionOptions(address=server.address, local=True))
        url = f"{server.ui_url}/namespaces/default/workflows/{spec.workflow_id}"
        on_ui(url)
        async with heartbeat(path), build_worker(client, path):
            for s in specs:
                await start_train(client, s, task_queue=TASK_QUEUE, replace=True)
            statuses = await asyncio.gather(
                *(_run_train(client, s.cluster, until_cycle, on_status, interrupt) for s in specs)
            )
    figures, per_cluster = _summary(path, specs, statuses)
    return {
        "preset": preset,
        **figures,
        "wall_seconds": round(time.monotonic() - started, 3),
        "fleet": str(path),
        "ui": url,
        "clusters": per_cluster,
        "interrupted": interrupt.signal,
    }


def _demo_specs(
    preset: str,
    shape: Preset,
    clusters: int,
    domain_size: int | None,
    budget: str,
    until_cycle: bool,
    targets: dict[str, str] | None,
) -> list[TrainSpec]:
    """One train's spec for each of the first ``clusters`` clusters, refused (ValueError) as
    `train start` would refuse it."""
    names = shape.cluster_names()
    if not 1 <= clusters <= len(names):
        raise ValueError(f"clusters: {preset} has {len(names)} cluster(s), not {clusters}")
    specs = [
        demo_spec(preset, domain_size, budget, until_cycle, c, targets) for c in names[:clusters]
    ]
    spec = specs[0]
    if "switch_firmware" in spec.targets:  # refused up front, as `train start` does
        why = rack_fits_budget(spec.budget, shape.hosts_per_cluster, shape.hosts_per_rack)
        if why:
            raise ValueError(why)
    return specs


def _summary(
    path: StoreRef, specs: list[TrainSpec], statuses: list[TrainStatus]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The trains' figures summed over the clusters with what the fleet's audit found, and
    each cluster's own figures."""
    fleet = open_backend(path)
    try:
        report = audit(fleet)
        hours = {s.cluster: fleet.fleet_time(cluster=s.cluster) for s in specs}
        switch_versions = fleet.switch_versions()
    finally:
        fleet.close()
    kinds = Counter(v.kind for v in report.violations)
    per_cluster = {st.cluster: _figures(st, hours[st.cluster]) for st in statuses}
    first = statuses[0]
    return {
        **{k: _total(k, per_cluster) for k in _SUMMED},
        "lost_gpu_hours": round(_total("lost_gpu_hours", per_cluster), 3),
        "hosts_lost": kinds.get("host_lost", 0),
        "budget_violations": kinds.get("budget_exceeded", 0),
        "cycles_completed": min(st.cycles_completed for st in statuses),
        "train_reason": first.reason,
        "cycle_fleet_hours": max(f["cycle_fleet_hours"] for f in per_cluster.values()),
        "cycle_wall_seconds": max(f["cycle_wall_seconds"] for f in per_cluster.values()),
        "audit_ok": report.ok,
        "switch_versions": switch_versions,
        "violations": len(report.violations),
    }, per_cluster


#: Per-cluster figures that the summary adds up over the clusters the demo ran.
_SUMMED = ("hosts_total", "hosts_visited", "hosts_quarantined", "job_interruptions")


def _total(key: str, per_cluster: dict[str, dict[str, Any]]) -> Any:
    return sum(f[key] for f in per_cluster.values())


def _figures(status: TrainStatus, fleet_hours: float) -> dict[str, Any]:
    """One train's figures; ``fleet_hours`` is its cluster's clock when the demo ended."""
    visited, out = visit_figures(status)
    return {
        "hosts_total": status.hosts_total,
        "hosts_visited": visited,
        "hosts_quarantined": out,
        "job_interruptions": status.jobs_interrupted,
        "lost_gpu_hours": status.lost_gpu_hours,
        "cycles_completed": status.cycles_completed,
        "train_reason": status.reason,
        "cycle_fleet_hours": round(status.last_cycle_fleet_hours, 3),
        "cycle_wall_seconds": round(status.last_cycle_wall_seconds, 3),
        "fleet_hours": round(fleet_hours, 3),
    }


async def _run_train(
    client: Client,
    cluster: str,
    until_cycle: bool,
    on_status: Callable[[TrainStatus], None],
    interrupt: Interrupt,
) -> TrainStatus:
    """Follow one train until it stops (stopping it unless it completes its cycle, or when the
    demo is interrupted)."""
    status = await _watch(client, cluster, on_status, interrupt.stop)
    if status is None or interrupt.stop.is_set() or not until_cycle or status.state == "halted":
        why = f"demo interrupted ({interrupt.signal})" if interrupt.signal else "demo interrupted"
        reason = status.reason if status is not None and status.state == "halted" else why
        await control_train(client, cluster, "stop", reason or why)
    return await train_result(client, cluster)


async def _watch(
    client: Client,
    cluster: str,
    on_status: Callable[[TrainStatus], None],
    stop: asyncio.Event,
) -> TrainStatus | None:
    """Follow the train until it stops or the demo is interrupted; its last status (None if
    interrupted before the first)."""
    status: TrainStatus | None = None
    while not stop.is_set():
        try:
            status = await train_status(client, cluster)
        except Exception:  # the first query may race the first workflow task
            await _pause(stop, 0.3)
            continue
        on_status(status)
        if status.state in ("stopped", "halted"):
            return status
        await _pause(stop, 0.5)
    return status


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if the demo is interrupted meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
