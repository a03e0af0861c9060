"""``trainctl server`` and ``trainctl worker``: the embedded Temporal server and the daemon."""

from __future__ import annotations

import asyncio
import sys

import click

from orchestrator.cli.common import fail, handle_errors
from orchestrator.constants import TASK_QUEUE
from orchestrator.temporal_server import DevServer, DevServerConfig, DevServerError, serve_forever


@click.command("server")
@click.option("--port", type=int, default=7233, show_default=True, help="gRPC frontend port.")
@click.option("--ui-port", type=int, default=8233, show_default=True, help="Web UI port.")
@click.option("--headless", is_flag=True, help="Run without the Web UI.")
@handle_errors
def server(port: int, ui_port: int, headless: bool) -> None:
    """Run the embedded Temporal dev server (file-backed under TRAINCTL_HOME) with its UI."""
    dev = DevServer(DevServerConfig(port=port, ui_port=ui_port, headless=headless))

    def ready(s: DevServer) -> None:
        click.echo(f"Temporal at {s.address}; UI at {s.ui_url or '(headless)'}", err=True)

    try:
        sys.exit(serve_forever(dev, on_ready=ready))
    except DevServerError as err:
        fail(str(err))


@click.command("worker")
@click.option(
    "--metrics-port",
    type=int,
    default=9464,
    show_default=True,
    help="Port of the Prometheus /metrics endpoint (0 to disable).",
)
@click.option("--task-queue", default=TASK_QUEUE, show_default=True)
@click.option("--address", default=None, help="Temporal frontend (default $TEMPORAL_ADDRESS).")
@click.option("--log-json", is_flag=True, help="Structured JSON logs on stderr.")
@handle_errors
def worker(metrics_port: int, task_queue: str, address: str | None, log_json: bool) -> None:
    """Run the daemon: every workflow and activity, /metrics, graceful stop on SIGTERM."""
    from orchestrator.client import connect
    from orchestrator.fleet import fleet_path
    from orchestrator.logging import configure_logging
    from orchestrator.metrics import serve_metrics
    from orchestrator.worker import build_worker, run_until_signalled, stop_on_signals

    configure_logging(json=log_json)
    path = fleet_path()
    if not path.exists():
        fail(f"no fleet at {path}: run `trainctl fleet init` first")

    async def main() -> None:
        stop = stop_on_signals()  # before anything slow, so SIGTERM always drains gracefully
        try:
            client = await connect(address)
        except RuntimeError as err:
            fail(f"cannot reach Temporal: {err}")
        if metrics_port:
            serve_metrics(metrics_port, path)
        await run_until_signalled(build_worker(client, path, task_queue), stop)

    asyncio.run(main())


COMMANDS = [server, worker]
