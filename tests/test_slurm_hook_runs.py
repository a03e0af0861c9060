"""A site hook runs in a session of its own and is killed whole: no copy, no child outlives it.

Real child processes, no mocks: each hook here starts ``sleep`` with a unique duration (its
marker), and the test looks for that marker in ``/proc`` afterwards. The Slurm lab's own
cases (a train over a hook that hangs, crashes or prints bytes that are not UTF-8) are
``test_slurm_hook_limits``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from orchestrator.contracts.liveness import beating
from orchestrator.fleet.slurm.config import EX_TEMPFAIL
from orchestrator.fleet.slurm.hooks import run_site_command


def marker() -> str:
    """A ``sleep`` duration no other process on the machine uses."""
    return f"{300 + random.random() * 100:.6f}"


def running(mark: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds ``mark``."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark in cmd and state != "Z":
            out.append(int(proc.name))
    return out


def gone(mark: str, timeout: float = 3.0) -> bool:
    """Whether every process of ``mark`` is gone (a killed one may take a moment to go)."""
    deadline = time.monotonic() + timeout
    while running(mark):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_hook_that_hangs_is_killed_whole_at_its_timeout():
    """A hook waiting on two sleeps ends at its 1 s timeout as a retryable "timed out", and
    neither sleep is left running."""
    m = marker()
    start = time.monotonic()
    code, why = run_site_command(f"sleep {m} & sleep {m}", 1.0)
    took = time.monotonic() - start
    assert code == EX_TEMPFAIL and why.startswith("timed out after 1s"), (code, why)
    assert 0.9 < took < 4.0, took
    assert gone(m), running(m)


def test_a_hook_that_crashes_ends_at_once_and_leaves_nothing():
    """A hook killed by a signal while its child holds its output is over at once (not at its
    timeout), a retryable "crashed" naming the signal, and its child is killed with it."""
    m = marker()
    start = time.monotonic()
    code, why = run_site_command(f"sleep {m} & kill -KILL $$", 30.0)
    assert time.monotonic() - start < 5.0
    assert code == EX_TEMPFAIL and why.startswith("crashed: killed by SIGKILL"), (code, why)
    assert gone(m), running(m)


def test_a_script_hook_killed_by_a_signal_is_a_crash(tmp_path: Path):
    """A hook script the kernel killed (the shell reports 137) is a crash, not a hook's
    verdict that the install failed for good."""
    script = tmp_path / "hook.sh"
    script.write_text("#!/bin/sh\necho flashing\nkill -KILL $$\n")
    script.chmod(0o755)
    code, why = run_site_command(f"{script} h01 bios 3.2", 30.0)
    assert code == EX_TEMPFAIL, (code, why)
    assert why == "crashed: killed by SIGKILL (exit code 137): flashing", why


def test_output_that_is_not_utf8_is_kept_as_text():
    """A hook that succeeds printing bytes that are not UTF-8 (and a NUL) succeeds, its first
    line kept as text with replacement characters."""
    code, why = run_site_command(r"printf '\377\376 flashed \000 ok\n'", 10.0)
    assert code == 0, (code, why)
    assert why == "\ufffd\ufffd flashed \ufffd ok", why


def test_a_long_hook_tells_its_step_it_is_alive():
    """A hook running 2.5 s tells the step running it (an activity's heartbeat) at least
    twice, and a talkative one never blocks on a full pipe."""
    beats: list[float] = []
    with beating(lambda: beats.append(time.monotonic())):
        code, why = run_site_command("head -c 2000000 /dev/zero | tr '\\0' x; sleep 2.5", 10.0)
    assert code == 0 and why.startswith("xxxx") and len(why) == 300, (code, why[:20])
    assert len(beats) >= 2, beats
