"""``trainctl server`` and ``trainctl worker``: the embedded Temporal server and the daemon."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import sys

import click

from orchestrator.app.cli.common import (
    BadInput,
    emit,
    fail,
    handle_errors,
    json_option,
    open_fleet_or_fail,
    task_queue_option,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.app.temporal_server import (
    DevServer,
    DevServerConfig,
    DevServerError,
    serve_forever,
)
from orchestrator.telemetry.metrics import DEFAULT_METRICS_HOST

PORT = click.IntRange(1, 65_535)

#: ``--log-format``: how the long-running commands (server, worker) log on stderr.
log_format_option = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines on stderr: text for people, json (one object a line) for log shippers.",
)


@click.command("server")
@click.option("--port", type=PORT, default=7233, show_default=True, help="gRPC frontend port.")
@click.option("--ui-port", type=PORT, default=8233, show_default=True, help="Web UI port.")
@click.option("--headless", is_flag=True, help="Run without the Web UI.")
@log_format_option
@json_option
@handle_errors
def server(port: int, ui_port: int, headless: bool, log_format: str, as_json: bool) -> None:
    """Run the embedded Temporal dev server (file-backed under TRAINCTL_HOME) with its UI.

    One per TRAINCTL_HOME (a second is refused while the first lives); the server process dies
    with this one, and a restart on the same port works at once.
    """
    if not headless and ui_port == port:
        raise BadInput("ui_port: must differ from --port", field="ui_port")
    dev = DevServer(DevServerConfig(port=port, ui_port=ui_port, headless=headless))
    log = None
    if log_format == "json":
        from orchestrator.infra.logging import configure_logging, get_logger

        configure_logging(json=True)
        log = get_logger("trainctl.server")

    def ready(s: DevServer) -> None:
        out = {"address": s.address, "ui_url": s.ui_url, "pid": s.pid, "db": str(s.db_filename)}
        if log is not None:
            log.info("temporal server ready", **out)
            if not as_json:
                return
        emit(
            out,
            as_json,
            lambda o: click.echo(
                f"Temporal at {o['address']}; UI at {o['ui_url'] or '(headless)'}", err=True
            ),
        )
        sys.stdout.flush()

    try:
        code = serve_forever(dev, on_ready=ready)
        if log is not None:
            log.info("temporal server stopped", exit_code=code)
        sys.exit(code)
    except DevServerError as err:
        fail(str(err))


@click.command("worker")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65_535),
    default=9464,
    show_default=True,
    help="Port of the Prometheus /metrics endpoint (0 to disable).",
)
@click.option(
    "--metrics-host",
    default=DEFAULT_METRICS_HOST,
    show_default=True,
    help="Address /metrics binds to; 0.0.0.0 lets another host or container scrape it.",
    callback=lambda ctx, param, value: _metrics_host(value),
)
@task_queue_option
@connection_options
@click.option("--log-json", is_flag=True, help="Same as --log-format json (kept for scripts).")
@log_format_option
@json_option
@handle_errors
def worker(
    metrics_port: int,
    metrics_host: str,
    task_queue: str,
    address: str | None,
    log_json: bool,
    log_format: str,
    as_json: bool,
) -> None:
    """Run the daemon: every workflow and activity, /metrics, graceful stop on SIGTERM."""
    from orchestrator.app.breaker_watch import watching_breakers
    from orchestrator.app.cli.connection import options_from_context
    from orchestrator.app.ops_watch import watching
    from orchestrator.app.release_guard import older_open_runs, refusal
    from orchestrator.app.worker import heartbeat, serve, stop_on_signals
    from orchestrator.fleet import fleet_store, store_exists
    from orchestrator.infra.client import connect_resolved
    from orchestrator.infra.connection import resolve
    from orchestrator.infra.logging import configure_logging
    from orchestrator.telemetry.metrics import serve_metrics

    configure_logging(json=log_json or log_format == "json")
    path = fleet_store()  # TRAINCTL_STORE, else TRAINCTL_HOME/store, else the SQLite file
    if not store_exists(path):
        fail(f"no fleet at {path}: run `trainctl fleet init` first", field="fleet")
    open_fleet_or_fail().close()  # a damaged fleet stops the worker here, in one line

    async def main() -> None:
        stop = stop_on_signals()  # before anything slow, so SIGTERM always drains gracefully
        if metrics_port:  # before connecting: a bad address fails at once, not after a wait
            try:
                serve_metrics(metrics_port, path, metrics_host)
            except (OSError, ValueError, UnicodeError) as err:
                # A port taken or privileged is the port's fault; anything else (no such
                # name, an address not on this machine) is the host's.
                field = (
                    "metrics_port"
                    if isinstance(err, OSError) and err.errno in (errno.EADDRINUSE, errno.EACCES)
                    else "metrics_host"
                )
                why = (err.strerror if isinstance(err, OSError) else None) or str(err)
                fail(
                    f"{field}: cannot serve /metrics on {metrics_host[:80]}:{metrics_port}: {why}",
                    field=field,
                )
        client = await connect_or_fail(address)  # a bad address or flag fails here, at once
        older = await older_open_runs(client, task_queue)
        if older:  # their histories do not replay on this release
            raise BadInput(refusal(older), field="worker")
        conn = resolve(options_from_context(address))
        async with contextlib.AsyncExitStack() as stack:
            # `fleet init --force` refuses while the heartbeat is fresh
            await stack.enter_async_context(heartbeat(path))
            if metrics_port:  # operations' figures into /metrics (orchestrator/app/ops_watch.py)
                await stack.enter_async_context(watching(client))
            # every cluster's circuit breaker (orchestrator/app/breaker_watch.py)
            await stack.enter_async_context(watching_breakers(client, path))
            await serve(client, path, task_queue, stop, reconnect=lambda: connect_resolved(conn))

    asyncio.run(main())


def _metrics_host(value: str) -> str:
    """A host name or an IP address (checked before any lookup: a bad name can hang one)."""
    text = value.strip()
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,253}|\[?[0-9A-Fa-f:.]{2,45}\]?", text):
        raise click.BadParameter(
            f"{value[:60]!r} is not a host name or an IP address", param_hint="metrics_host"
        )
    return text.strip("[]")


COMMANDS = [server, worker]
