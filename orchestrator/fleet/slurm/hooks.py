"""Running a site command (an install hook, the health command) so that it cannot run away.

A hook is ``/bin/sh -c COMMAND``, and what it starts (an installer, a ``sleep`` it waits on)
are its children: killing the shell alone at the timeout would leave them running, and every
retry would add a copy. So each run gets a session of its own (``start_new_session``), and the
whole process group is killed (``os.killpg``) when the run ends: at its timeout, when the shell
exits leaving something behind, or when the caller stops waiting (an activity cancelled by a
heartbeat that found it timed out). A hook that hangs on a node therefore never has more than
one copy running there.

What a run says is a verdict the install can count: exit 0 installed; ``EX_TEMPFAIL`` (75) a
failure worth retrying; a run that timed out or crashed (killed by a signal, which the shell
reports as 128 + its number, or could not be started) is also ``EX_TEMPFAIL``, a failed attempt
counted toward the host's limit like any other; any other code fails for good. Output is read
as bytes and decoded leniently (``errors="replace"``): a hook printing bytes that are not UTF-8
still installs, and its first line is kept as text (without NULs, which no store or
``scontrol`` argument accepts).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from orchestrator.contracts.liveness import alive
from orchestrator.fleet.slurm.config import EX_TEMPFAIL

#: Seconds between looks at a running hook (each look tells the caller it is alive).
POLL_SECONDS = 1.0
#: Seconds the output of a killed hook is still read (a process outside its group may hold it).
DRAIN_SECONDS = 2.0
#: Characters of the first line kept as the reason of a verdict.
REASON_CHARS = 300


def _kill_group(pid: int) -> None:
    """Kill the session a hook runs in (gone already is as good)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _first_line(out: bytes, err: bytes) -> str:
    """The first line printed (stdout, else stderr), decoded leniently."""
    for raw in (out, err):
        text = raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd").strip()
        if text:
            return text.splitlines()[0][:REASON_CHARS]
    return ""


def _killed_by(code: int) -> str:
    """The signal that killed the hook ('' if none): the shell's own death (a negative code),
    or what the shell reports for a command of it killed by a signal (128 + its number)."""
    number = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else 0
    try:
        return signal.Signals(number).name if number else ""
    except ValueError:
        return ""


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes, bool]:
    """What ``proc`` printed, once it ended (and whether the deadline ended it), reading its
    output as it comes so a talkative hook never blocks on a full pipe."""
    while True:
        left = deadline - time.monotonic()
        try:
            stdout, stderr = proc.communicate(timeout=max(0.01, min(POLL_SECONDS, left)))
            return stdout, stderr, False
        except subprocess.TimeoutExpired:
            # The shell ended but something it started still holds its output, or the time
            # is up: either way the run is over, and all of it goes.
            ended = proc.poll() is not None
            if ended or time.monotonic() >= deadline:
                _kill_group(proc.pid)
                stdout, stderr = _rest(proc)
                return stdout, stderr, not ended
        alive()


def _rest(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """The output left once the group is killed; a process that left the session (``setsid``)
    may still hold it open, so reading stops after ``DRAIN_SECONDS``."""
    try:
        return proc.communicate(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired as err:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return err.output or b"", err.stderr or b""


def run_site_command(command: str, timeout_seconds: float) -> tuple[int, str]:
    """Run ``command`` by ``/bin/sh -c`` in a session of its own: its exit code and the first
    line it printed. One that outlives ``timeout_seconds`` or crashes is ``EX_TEMPFAIL`` with
    "timed out ..." or "crashed ..."; its process group is killed whatever happens.
    While it runs, the step is told it is alive about every ``POLL_SECONDS`` (``liveness``)."""
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as err:
        return EX_TEMPFAIL, f"crashed: could not start: {err}"[:REASON_CHARS]
    try:
        stdout, stderr, timed_out = _wait(proc, time.monotonic() + timeout_seconds)
    finally:
        _kill_group(proc.pid)  # what it left behind, or all of it when the caller gave up
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    text = _first_line(stdout, stderr)
    if timed_out:
        return EX_TEMPFAIL, f"timed out after {timeout_seconds:g}s (its processes killed)"
    signal_name = _killed_by(proc.returncode)
    if signal_name:
        crash = f"crashed: killed by {signal_name} (exit code {proc.returncode})"
        return EX_TEMPFAIL, f"{crash}: {text}"[:REASON_CHARS] if text else crash
    return proc.returncode, text


__all__ = ["POLL_SECONDS", "run_site_command"]
