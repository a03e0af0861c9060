"""``trainctl demo``: a whole maintenance train on one machine, from an empty directory.

It builds a fresh simulated fleet under TRAINCTL_HOME, starts the embedded Temporal server (with
its UI) and a worker in this process, launches a train on ``c00`` and shows its progress. With
``until_cycle_complete`` it stops the train after one full visit cycle, then audits the fleet's
event log, so the summary's figures come from the log rather than from the train's own word.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from orchestrator.fleet import SqliteFleet, fleet_path
from orchestrator.paths import trainctl_home
from orchestrator.presets import get_preset
from orchestrator.temporal_server import DevServer, DevServerConfig
from orchestrator.train.spec import TrainSpec
from orchestrator.train.types import ControlRequest, TrainStatus

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


def demo_spec(preset: str, domain_size: int | None, budget: str, until_cycle: bool) -> TrainSpec:
    return TrainSpec.model_validate(
        {
            "cluster": "c00",
            "campaign": "demo",
            "domain_size": domain_size or DEMO_DOMAIN_SIZE.get(preset, 8),
            "budget": {"max_unavailable": budget},
            "targets": DEMO_TARGETS,
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
    show_progress: bool,
) -> dict[str, Any]:
    from orchestrator.audit import audit
    from orchestrator.cli.train import start_train
    from orchestrator.worker import build_worker
    from workflows.cluster_train import ClusterTrain

    started = time.monotonic()
    shape = get_preset(preset)
    spec = demo_spec(preset, domain_size, budget, until_cycle)
    path = fleet_path()
    SqliteFleet.create(path, shape, seed, speed).close()
    home = trainctl_home()
    db = home / "demo-temporal.db"
    db.unlink(missing_ok=True)
    config = DevServerConfig(port=free_port(port), ui_port=free_port(ui_port), db_filename=db)
    console = Console(stderr=True)
    async with DevServer(config) as server:
        from orchestrator.client import connect

        client = await connect(server.address)
        url = f"{server.ui_url}/namespaces/default/workflows/{spec.workflow_id}"
        console.print(f"Temporal UI: [link={url}]{url}[/link]")
        async with build_worker(client, path):
            handle = await start_train(client, spec, replace=True)
            status = await _watch(
                handle, ClusterTrain, shape.hosts_per_cluster, console, show_progress
            )
            if not until_cycle or status.state == "halted":
                status = await handle.execute_update(
                    "stop",
                    ControlRequest(reason=status.reason or "demo interrupted"),
                    result_type=TrainStatus,
                )
            status = await handle.result()
    fleet = SqliteFleet(path)
    try:
        report = audit(fleet)
    finally:
        fleet.close()
    kinds = Counter(v.kind for v in report.violations)
    return {
        "preset": preset,
        "hosts_total": status.hosts_total,
        "hosts_visited": status.hosts_visited_this_cycle,
        "hosts_quarantined": status.quarantined + status.in_repair,
        "hosts_lost": kinds.get("host_lost", 0),
        "budget_violations": kinds.get("budget_exceeded", 0),
        "job_interruptions": status.jobs_interrupted,
        "lost_gpu_hours": status.lost_gpu_hours,
        "cycles_completed": status.cycles_completed,
        "train_reason": status.reason,
        "cycle_fleet_hours": round(status.last_cycle_fleet_hours, 3),
        "cycle_wall_seconds": round(status.last_cycle_wall_seconds, 3),
        "audit_ok": report.ok,
        "violations": len(report.violations),
        "wall_seconds": round(time.monotonic() - started, 3),
        "fleet": str(path),
        "ui": url,
    }


async def _watch(handle: Any, wf: Any, total: int, console: Console, show: bool) -> TrainStatus:
    """Show a progress bar until the train stops (or the user interrupts)."""
    progress = Progress(
        TextColumn("[bold]cycle"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        disable=not show,
    )
    status: TrainStatus | None = None
    with progress:
        task = progress.add_task("starting", total=total)
        try:
            while True:
                try:
                    status = await handle.query(wf.status)
                except Exception:  # the first query may race the first workflow task
                    await asyncio.sleep(0.3)
                    continue
                done = status.hosts_visited_this_cycle + status.quarantined + status.in_repair
                why = f" waiting: {status.waiting}" if status.waiting else ""
                progress.update(
                    task,
                    completed=done if status.cycles_completed == 0 else total,
                    description=f"{status.in_maintenance} in maintenance, "
                    f"{status.quarantined} quarantined, fleet h {status.fleet_hours:.1f}{why}",
                )
                if status.state in ("stopped", "halted"):
                    return status
                await asyncio.sleep(0.5)
        except (KeyboardInterrupt, asyncio.CancelledError):
            assert status is not None
            return status
