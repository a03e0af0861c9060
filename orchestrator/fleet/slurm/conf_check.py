"""A slurm.conf checked before any Slurm command runs: text, a controller, one that answers.

Slurm's own tools say little when these are wrong (``sinfo: fatal: Unable to process
configuration file`` without ``SlurmctldHost``; with the controller down they retry for seconds
and then report no nodes at all), so ``fleet init --backend slurm`` asks here first:

- the file is UTF-8 text (``slurm_conf: ... is not a text file``);
- it names a controller (``SlurmctldHost``, or the older ``ControlMachine``), unless it
  ``Include``s other files, which may;
- one of the controllers accepts a TCP connection on ``SlurmctldPort`` (6817 by default) within
  a couple of seconds (``the controller at HOST:PORT does not answer``).
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

from orchestrator.contracts.errors import PermanentError, TemporaryError

#: slurmctld's port when slurm.conf names none.
DEFAULT_SLURMCTLD_PORT = 6817
#: Seconds each controller has to accept a connection.
CONNECT_TIMEOUT_SECONDS = 2.0

_LINE = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(\S+)", re.MULTILINE)


class ControllerNotAnswering(TemporaryError):
    """No controller of the slurm.conf accepts a connection (down, or a wrong host/port)."""

    kind = "SlurmControllerNotAnswering"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.field = "slurm_conf"


def read_conf(path: Path) -> str:
    """The slurm.conf's text, or PermanentError naming ``slurm_conf`` (binary, unreadable)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise PermanentError(
            f"slurm_conf: cannot read {path}: {err.strerror or err}", field="slurm_conf"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PermanentError(
            f"slurm_conf: {path} is not a text file (not UTF-8): is it a slurm.conf?",
            field="slurm_conf",
        ) from None
    if "\x00" in text:
        raise PermanentError(
            f"slurm_conf: {path} is not a text file (NUL bytes): is it a slurm.conf?",
            field="slurm_conf",
        )
    return text


def controllers(text: str) -> list[tuple[str, int]]:
    """(address, port) of each controller a slurm.conf names, in its order."""
    settings = [(k.lower(), v) for k, v in _LINE.findall(_strip_comments(text))]
    port = DEFAULT_SLURMCTLD_PORT
    for key, value in settings:
        if key == "slurmctldport":
            first = value.split("-", 1)[0]
            if first.isdigit():
                port = int(first)
    out = []
    for key, value in settings:
        if key in ("slurmctldhost", "controlmachine", "backupcontroller"):
            # SlurmctldHost=name or name(address): the address is where it listens.
            m = re.fullmatch(r"([^()]+)(?:\(([^()]+)\))?", value)
            if m:
                out.append(((m.group(2) or m.group(1)).strip(), port))
    return out


def check_conf(path: Path) -> None:
    """Refuse a slurm.conf Slurm cannot use, saying why; return when a controller answers.

    Raises:
        PermanentError: not text, or no controller configured (field ``slurm_conf``).
        ControllerNotAnswering: every configured controller refused or timed out.
    """
    text = read_conf(path)
    found = controllers(text)
    if not found:
        if re.search(r"^\s*include\s", _strip_comments(text), re.MULTILINE | re.IGNORECASE):
            return  # an included file may name it: Slurm's own commands will tell
        raise PermanentError(
            f"slurm_conf: no controller configured (SlurmctldHost) in {path}",
            field="slurm_conf",
        )
    for host, port in found:
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS):
                return
        except OSError:
            continue
    where = ", ".join(f"{h}:{p}" for h, p in found)
    raise ControllerNotAnswering(
        f"slurm_conf: the controller at {where} does not answer (is slurmctld running? "
        f"the address and SlurmctldPort of {path})"
    )


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())
