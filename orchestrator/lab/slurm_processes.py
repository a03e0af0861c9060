"""The lab's own processes: found by their pid files and command lines, and stopped.

``down`` must stop exactly what ``up`` started and never another's process (another lab, a
machine's own Slurm or munge, the shell that runs ``down``): a pid file counts only while its
process runs and its command line names a file of this lab, and leftovers (job steps a stopped
slurmd left behind) are those whose environment names the lab's ``slurm.conf``, this process
and its ancestors spared. Kept apart from starting the lab so that rule reads in one place.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def running_pid(path: Path) -> int | None:
    """The pid in the pid file at ``path`` while that process runs (else None)."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ours(pid: int, d: Path) -> bool:
    """The process's command line names a file of this lab (so down never kills another's)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(d) in cmd


def stop(pidfile: Path, d: Path, timeout: float) -> None:
    """Stop the lab process of ``pidfile`` (TERM, then KILL after ``timeout`` seconds)."""
    pid = running_pid(pidfile)
    if pid is None or not _ours(pid, d):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def _ancestors() -> set[int]:
    """This process and its ancestors (a shell that exported the lab's SLURM_CONF is spared)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def lab_processes(d: Path) -> list[int]:
    """Processes started under the lab: their environment names the lab's slurm.conf (the
    daemons get it from ``up``, job steps and jobs inherit it)."""
    mark = f"SLURM_CONF={d / 'slurm.conf'}".encode()
    spare = _ancestors()
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in spare:
            continue
        try:
            env = (proc / "environ").read_bytes()
        except OSError:
            continue
        if mark in env.split(b"\0"):
            out.append(int(proc.name))
    return out


__all__ = ["alive", "lab_processes", "running_pid", "stop"]
