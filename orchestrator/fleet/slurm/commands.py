"""The Slurm commands the backend runs, their parsing, and their errors in two words.

Every call goes through ``SlurmCommands.run`` with ``SLURM_CONF`` set, so one trainctl can drive
a cluster other than the machine's default. Reads use Slurm 22.05's machine-readable output
(``sinfo --json``, ``squeue --json``; ``scontrol`` has none there); changes are ``scontrol
update``/``reboot``/``requeue`` and ``scancel``. A failure becomes ``SlurmUnavailable`` (a
temporary error: the controller is down or busy, so activities retry) or a permanent one
(``SlurmUnknownObject``, ``SlurmPermissionDenied``: retrying cannot heal them).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.contracts.errors import (
    PermanentError,
    SlurmPermissionDenied,
    SlurmUnknownObject,
    TemporaryError,
)
from orchestrator.contracts.hostlist import expand_hostlist

#: Seconds one Slurm command may take before it counts as a controller not answering.
COMMAND_TIMEOUT_SECONDS = 30.0


class SlurmUnavailable(TemporaryError):
    """The controller did not answer (down, restarting, busy): retrying may heal it."""

    kind = "SlurmUnavailable"


class SlurmCommandFailed(TemporaryError):
    """A Slurm command failed for a reason not known to be permanent."""

    kind = "SlurmCommandFailed"


_UNAVAILABLE = (
    "unable to contact slurm controller",
    "connection refused",
    "socket timed out",
    "timed out",
    "standby mode",
    "resource temporarily unavailable",
    "communication connection failure",
    "zero bytes were transmitted",
    "slurmctld is not responding",
)
_UNKNOWN = (
    "invalid node name",
    "invalid job id",
    "unknown node",
    "node not found",
    "requested reservation is invalid",
)
_DENIED = ("access/permission denied", "permission denied", "access denied", "invalid user")


def classify_failure(command: Sequence[str], code: int, stderr: str) -> Exception:
    """A failed command as the error kind retries should see (message names ``slurm``)."""
    text = " ".join(stderr.split()) or f"exit code {code}"
    message = f"slurm: `{' '.join(command[:3])}` failed: {text[:300]}"
    low = text.lower()
    if any(w in low for w in _DENIED):
        return SlurmPermissionDenied(message, field="slurm")
    if any(w in low for w in _UNKNOWN):
        return SlurmUnknownObject(message, field="slurm")
    if any(w in low for w in _UNAVAILABLE):
        return SlurmUnavailable(message)
    return SlurmCommandFailed(message)


@dataclass(frozen=True)
class SlurmNode:
    """One node as ``sinfo --json`` reports it."""

    name: str
    state: str  # base state, lower case: idle, allocated, mixed, down, unknown, ...
    flags: frozenset[str]  # DRAIN, REBOOT_ISSUED, REBOOT_REQUESTED, NOT_RESPONDING, ...
    reason: str
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    boot_time: int = 0

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags or self.state in ("drained", "draining")

    @property
    def rebooting(self) -> bool:
        return bool({"REBOOT_ISSUED", "REBOOT_REQUESTED"} & self.flags) or self.state == "reboot"

    @property
    def down(self) -> bool:
        return self.state in ("down", "fail", "future", "unknown") or "FAIL" in self.flags

    @property
    def out_of_service(self) -> bool:
        """Drained, rebooting or down: taking no new jobs (what the budget counts)."""
        return self.drained or self.rebooting or self.down


@dataclass(frozen=True)
class SlurmJob:
    """One job as ``squeue --json`` reports it (times in Unix seconds)."""

    id: int
    state: str  # RUNNING, PENDING, COMPLETING, ...
    nodes: tuple[str, ...]
    start: int
    end: int
    comment: str
    requeue: bool
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.state in ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING")


def _number(value: Any) -> int:
    """Slurm 22.05 JSON numbers are plain ints, later ones ``{"set":..,"number":..}``."""
    if isinstance(value, dict):
        return int(value.get("number") or 0)
    return int(value or 0)


def parse_nodes(payload: str) -> list[SlurmNode]:
    """``sinfo --json`` -> nodes (one per name, partitions merged)."""
    data = json.loads(payload)
    nodes: dict[str, SlurmNode] = {}
    for n in data.get("nodes") or []:
        state = n.get("state") or "unknown"
        if isinstance(state, list):  # later versions: a list of words
            flags = {s.upper() for s in state[1:]}
            state = state[0] if state else "unknown"
        else:
            flags = {str(f).upper() for f in n.get("state_flags") or []}
        feats = n.get("active_features") or n.get("features") or ""
        if isinstance(feats, list):
            feats = ",".join(feats)
        name = str(n["name"])
        parts = tuple(n.get("partitions") or ())
        if name in nodes:
            parts = tuple(sorted({*nodes[name].partitions, *parts}))
        nodes[name] = SlurmNode(
            name=name,
            state=str(state).lower(),
            flags=frozenset(flags),
            reason=str(n.get("reason") or ""),
            features=tuple(f for f in str(feats).split(",") if f and f != "(null)"),
            partitions=parts,
            boot_time=_number(n.get("boot_time")),
        )
    return list(nodes.values())


def parse_jobs(payload: str) -> list[SlurmJob]:
    """``squeue --json`` -> jobs."""
    data = json.loads(payload)
    out = []
    for j in data.get("jobs") or []:
        state = j.get("job_state") or ""
        if isinstance(state, list):
            state = state[0] if state else ""
        nodes = str(j.get("nodes") or "")
        out.append(
            SlurmJob(
                id=_number(j["job_id"]),
                state=str(state).upper(),
                nodes=tuple(expand_hostlist(nodes)) if nodes else (),
                start=_number(j.get("start_time")),
                end=_number(j.get("end_time")),
                comment=str(j.get("comment") or ""),
                requeue=bool(j.get("requeue")),
                name=str(j.get("name") or ""),
            )
        )
    return out


class SlurmCommands:
    """Runs Slurm's commands against one ``slurm.conf``; every failure raised by kind."""

    def __init__(self, slurm_conf: Path, timeout: float = COMMAND_TIMEOUT_SECONDS) -> None:
        self.slurm_conf = slurm_conf
        self.timeout = timeout

    def run(self, *args: str) -> str:
        env = {**os.environ, "SLURM_CONF": str(self.slurm_conf)}
        try:
            done = subprocess.run(
                list(args),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(
                f"slurm: `{' '.join(args[:3])}` timed out after {self.timeout:g}s"
            ) from None
        except FileNotFoundError:
            raise PermanentError(
                f"slurm: `{args[0]}` is not installed (install slurm-client)", field="slurm"
            ) from None
        if done.returncode != 0:
            raise classify_failure(args, done.returncode, done.stderr or done.stdout)
        # scontrol exits 0 on some refusals but says so on stderr
        if args[0] == "scontrol" and done.stderr.strip():
            err = classify_failure(args, 0, done.stderr)
            if not isinstance(err, SlurmCommandFailed):
                raise err
        return done.stdout

    # ------------------------------------------------------------------ reads
    def nodes(self) -> list[SlurmNode]:
        return parse_nodes(self.run("sinfo", "--json"))

    def jobs(self) -> list[SlurmJob]:
        return parse_jobs(self.run("squeue", "--json"))

    def ping(self) -> bool:
        """Whether the controller answers (``scontrol ping`` says UP)."""
        try:
            return "UP" in self.run("scontrol", "ping")
        except (SlurmUnavailable, SlurmCommandFailed):
            return False

    # ---------------------------------------------------------------- changes
    def drain(self, node: str, reason: str) -> None:
        self.run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        self.run("scontrol", "update", f"nodename={node}", "state=resume")

    def reboot(self, node: str, reason: str) -> None:
        """Reboot once idle; the node stays down afterwards until ``resume`` (it must pass
        its health check before it takes jobs again)."""
        self.run("scontrol", "reboot", "ASAP", "nextstate=DOWN", f"reason={reason}", node)

    def set_features(self, node: str, features: Sequence[str]) -> None:
        text = ",".join(features)
        self.run(
            "scontrol",
            "update",
            f"nodename={node}",
            f"availablefeatures={text}",
            f"activefeatures={text}",
        )

    def set_weight(self, nodes: Sequence[str], weight: int) -> None:
        """Slurm allocates nodes of the lowest ``Weight`` first (``scontrol update`` keeps it
        until slurmctld restarts without its state)."""
        self.run("scontrol", "update", f"nodename={','.join(nodes)}", f"weight={weight}")

    def create_reservation(self, name: str, nodes: Sequence[str], minutes: int) -> None:
        """A maintenance reservation on ``nodes`` from now: their jobs run on, no new one
        starts there (``flags=maint,ignore_jobs``)."""
        self.run(
            "scontrol", "create", "reservation", f"reservationname={name}", "starttime=now",
            f"duration={minutes}", "flags=maint,ignore_jobs", "users=root",
            f"nodes={','.join(nodes)}",
        )  # fmt: skip

    def update_reservation(self, name: str, nodes: Sequence[str], minutes: int) -> None:
        self.run(
            "scontrol", "update", f"reservationname={name}", f"duration={minutes}",
            f"nodes={','.join(nodes)}",
        )  # fmt: skip

    def delete_reservation(self, name: str) -> None:
        """Gone already is as good."""
        with contextlib.suppress(SlurmUnknownObject):
            self.run("scontrol", "delete", f"reservationname={name}")

    def requeue(self, job_id: int) -> None:
        self.run("scontrol", "requeue", str(job_id))

    def cancel(self, job_id: int) -> None:
        self.run("scancel", str(job_id))
