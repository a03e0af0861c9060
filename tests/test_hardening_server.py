"""`trainctl server` lives and dies with its owner (issue 10, items 6 and 7).

A SIGKILLed `trainctl server` used to leave its `temporal` child serving, a restart was refused
for a minute (the port probe counted sockets in TIME-WAIT as busy), and a second server on the
same TRAINCTL_HOME started against the same database. Each case runs the real console entry
point and the real Temporal binary.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.app.demo import free_port
from orchestrator.app.temporal_server import (
    DevServer,
    DevServerConfig,
    DevServerError,
    _hold_lock,
    _port_free,
)

REPO = Path(__file__).resolve().parent.parent
ENTRY = "from orchestrator.app.cli import entrypoint; entrypoint()"


def start_server(home: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", ENTRY, "server", "--headless", "--port", str(port), "--json"],
        cwd=REPO,
        env={**os.environ, "TRAINCTL_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ready(proc: subprocess.Popen[str]) -> dict[str, object]:
    """The server's one JSON line once its frontend answers (it prints it then)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until ready or exit; the server has a 60 s timeout
    assert line, f"server exited {proc.wait()}: {proc.stderr.read() if proc.stderr else ''}"
    out: dict[str, object] = json.loads(line)
    return out


def dead(pid: int) -> bool:
    """Gone, or a zombie waiting for whoever adopted it to reap it (it no longer serves)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.split() == ["State:", "Z", "(zombie)"] for line in f)
    except FileNotFoundError:
        return True


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if dead(pid):
            return True
        time.sleep(0.05)
    return False


def kill(proc: subprocess.Popen[str], child: int | None = None) -> None:
    """Tear down what this test started, by pid."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if child is not None and not dead(child):
        os.kill(child, signal.SIGKILL)


def test_port_probe_ignores_time_wait_but_not_a_listener() -> None:
    """The probe binds like the server (SO_REUSEADDR): a closed connection's TIME-WAIT on the
    port does not make it busy; a listening socket does."""
    port = free_port(0)
    listener = socket.socket()
    # As the server's (Go's) listener does; its accepted connections inherit the option, which
    # is what lets a new listener bind past their TIME-WAIT.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    assert not _port_free("127.0.0.1", port)
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = listener.accept()
    conn.close()  # the server side closes first: its end, on `port`, enters TIME-WAIT
    time.sleep(0.1)
    client.close()
    listener.close()
    plain = socket.socket()
    with pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what the old probe did: refused for ~60 s
    plain.close()
    assert _port_free("127.0.0.1", port)


def test_sigkilled_server_takes_its_child_along_and_restarts_at_once(tmp_path: Path) -> None:
    """SIGKILL the CLI: its `temporal` child dies too, and a new server starts on the same port
    right away (sockets of the old one in TIME-WAIT notwithstanding), on the same database."""
    home = tmp_path / "home"
    home.mkdir()
    port = free_port(0)
    first = start_server(home, port)
    child: int | None = None
    try:
        info = ready(first)
        child = int(str(info["pid"]))
        assert info["address"] == f"127.0.0.1:{port}"
        assert os.getpgid(child) == child, "the server runs in its own process group"
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert wait_dead(child, 5), "the temporal child outlived its SIGKILLed parent"
    finally:
        kill(first, child)
    started = time.monotonic()
    second = start_server(home, port)
    child = None
    try:
        info = ready(second)
        child = int(str(info["pid"]))
        assert time.monotonic() - started < 30, "restart on the same port waited for TIME-WAIT"
        # A second server on the same TRAINCTL_HOME (another port) is refused while this lives.
        other = subprocess.run(
            [sys.executable, "-c", ENTRY, "server", "--headless", "--port", str(free_port(0))]
            + ["--json"],
            cwd=REPO,
            env={**os.environ, "TRAINCTL_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.returncode == 1, other
        err = json.loads(other.stdout)
        assert "another trainctl server is using" in err["error"]
        assert str(second.pid) in err["error"] and f"127.0.0.1:{port}" in err["error"]
        assert "Traceback" not in other.stderr
        # SIGTERM: a graceful stop, exit 0, the child gone, the lock free for the next one.
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
        assert wait_dead(child, 5)
    finally:
        kill(second, child)
    lock = DevServer(
        DevServerConfig(port=port, headless=True, db_filename=home / "temporal.db")
    ).lock_file
    assert lock.exists()
    with lock.open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds it any more


def test_the_lock_refuses_a_second_dev_server_before_spawning(tmp_path: Path) -> None:
    """In-process: while one DevServer holds the database's lock, another one's start fails
    with a clear DevServerError and spawns nothing; the first one's stop frees it."""
    db = tmp_path / "temporal.db"
    first = DevServer(DevServerConfig(port=free_port(0), headless=True, db_filename=db))
    held = _hold_lock(first.lock_file, db, first.address)
    try:
        second = DevServer(DevServerConfig(port=free_port(0), headless=True, db_filename=db))
        with pytest.raises(DevServerError, match="another trainctl server is using"):
            second.start()
        assert second.pid is None
    finally:
        held.close()
    third = DevServer(DevServerConfig(port=free_port(0), headless=True, db_filename=db))
    third._lock = _hold_lock(third.lock_file, db, third.address)
    third._release()
    assert third._lock is None
