"""Run a tutorial page of the docs site: its ``bash`` blocks, in order, in one shell.

A tutorial is a path a user takes end to end; its commands are the ``bash`` fenced blocks of
the page (``text`` blocks show output and are not run). They run as one ``bash -euo pipefail``
script from the repository's root, so a command that fails fails the test, exactly as it would
stop a user. Two things differ from a user's shell, both outside the page's text: ``trainctl``
is this checkout's CLI, and the ports the page names (7233, 8233, 9464) are replaced by free
ones, so tutorials run beside other tests and servers on one machine. ``TMPDIR`` points into the
test's own directory, so the fleet a page makes under ``mktemp -d`` is audited after the test.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The ports tutorials name: Temporal's gRPC and Web UI, the worker's /metrics.
PAGE_PORTS = ("7233", "8233", "9464")
_BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def bash_blocks(page: Path) -> list[str]:
    """The page's ``bash`` fenced blocks, in order."""
    return _BASH_BLOCK.findall(page.read_text())


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _with_free_ports(script: str) -> str:
    for port in PAGE_PORTS:
        script = re.sub(rf"\b{port}\b", _free_port(), script)
    return script


def _cli_on_path(bin_dir: Path) -> None:
    """A ``trainctl`` that runs this checkout's CLI with the test's interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cli = bin_dir / "trainctl"
    cli.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -c '
        '"from orchestrator.app.cli import entrypoint; entrypoint()" "$@"\n'
    )
    cli.chmod(0o755)


def run_tutorial(
    page: Path, tmp: Path, services: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run every ``bash`` block of ``page``; the result holds the script's output.
    ``services``: the environment a page says its reader brings (a PostgreSQL's ``PG*``)."""
    blocks = bash_blocks(page)
    assert blocks, f"{page} has no bash block to run"
    script = _with_free_ports("\n".join(blocks))
    # Whatever the page leaves running in the background stops with the test.
    prologue = "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n"
    _cli_on_path(tmp / "bin")
    (tmp / "tmp").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TMPDIR": str(tmp / "tmp"),
    }
    for name in ("TRAINCTL_HOME", "TRAINCTL_STORE", "TEMPORAL_ADDRESS", "TEMPORAL_PROFILE"):
        env.pop(name, None)
    env.update(services or {})
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", prologue + script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
