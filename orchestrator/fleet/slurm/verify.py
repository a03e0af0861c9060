"""Verifying a Slurm node after its change: the reboot seen through, health, the versions.

A reboot is ``scontrol reboot ASAP nextstate=DOWN``, so the node stays out of service until
trainctl has verified it. Verifying waits (briefly, within one session) for the reboot to be
over, asks it again if a restarted controller lost it, runs the config's health command, and
checks the record carries the targets; a node is resumed only after it passed (``holds``). A
node someone else drained or downed meanwhile is handed over, not verified (``still_ours``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from orchestrator.contracts.backend import Verification
from orchestrator.contracts.errors import TemporaryError
from orchestrator.fleet.slurm.config import render
from orchestrator.fleet.slurm.core import SLURM_ACTOR, S, SlurmCore, taken_by_others
from orchestrator.fleet.slurm.hooks import run_site_command

#: Seconds verify waits within one call for a node's reboot to finish before it asks to be
#: called again (a temporary error), so a session never holds the record for long.
REBOOT_WAIT_SECONDS = 40.0
#: Seconds after which a reboot Slurm shows no sign of (no flag, no new boot) is asked again.
REBOOT_REASK_SECONDS = 15.0
#: Seconds a node may answer, booted after the reboot was asked, while slurmctld still flags
#: it rebooting, before the reboot counts as over: a second reboot asked right after a first
#: (an install's, then a rollback's) can leave the flag behind on a node that did reboot.
REBOOT_STALE_FLAG_SECONDS = 20.0


class VerifyOps(SlurmCore):
    """Reboot, wait for it, health-check and verify a node."""

    def reboot(self, name: str, actor: str) -> None:
        self.cmd.reboot(name, self._reason(actor, "reboot"))
        self.state.setdefault("reboots", {})[name] = time.time()  # Unix seconds it was asked
        self._log(actor, "rebooted", name)

    def _wait_reboot(self, name: str) -> str:
        """'' once the node's reboot (if any) is over; else why it is not.

        Over means the node booted after the reboot was asked (its ``boot_time``), answers and
        carries no reboot flag: the flags alone are not enough, since a controller restarted
        meanwhile may have forgotten them (the node then comes back "unexpectedly rebooted",
        down, which is still ours to verify and resume). A request the restarted controller
        lost altogether (no flag, no new boot) is asked again.
        """
        asked = self.state.get("reboots", {}).get(name)
        if asked is None:
            return ""
        deadline = time.monotonic() + REBOOT_WAIT_SECONDS
        while True:
            node = next((n for n in self.cmd.nodes() if n.name == name), None)
            if node is not None and taken_by_others(node):
                self._hand_over(self.host(name), node)  # an operator took it while it rebooted
                return f"left our hands: {self.host(name).reason}"
            answers = node is not None and "NOT_RESPONDING" not in node.flags
            if answers and node is not None and node.rebooting and node.boot_time >= asked - 1:
                seen = self.state.setdefault("reboot_flag_stale", {}).setdefault(name, time.time())
                if time.time() - seen > REBOOT_STALE_FLAG_SECONDS:
                    self.state["reboots"].pop(name, None)
                    self.state["reboot_flag_stale"].pop(name, None)
                    self._log(SLURM_ACTOR, "reboot_flag_stale", name)
                    return ""
            if answers and node is not None and not node.rebooting:
                if node.boot_time >= asked - 1:
                    self.state["reboots"].pop(name, None)
                    self.state.get("reboot_flag_stale", {}).pop(name, None)
                    return ""
                if time.time() - asked > REBOOT_REASK_SECONDS:
                    self.cmd.reboot(name, self._reason(self.host(name).owner, "reboot"))
                    self._log(SLURM_ACTOR, "reboot_asked_again", name)
            if time.time() - asked > self.config.reboot_timeout_seconds:
                self.state["reboots"].pop(name, None)
                return f"reboot did not complete within {self.config.reboot_timeout}"
            if time.monotonic() > deadline:
                raise TemporaryError(f"slurm: {name} is still rebooting")
            time.sleep(0.5)

    def health_check(self, name: str, actor: str) -> Verification:
        """The config's health command (none: a node whose slurmd answers is healthy)."""
        node = next((n for n in self.cmd.nodes() if n.name == name), None)
        if node is None or "NOT_RESPONDING" in node.flags:
            v = Verification(False, "slurmd not responding", 0.0)
        elif not self.config.health_command:
            v = Verification(True, "passed", 1.0)
        else:
            code, out = run_site_command(
                render(self.config.health_command, node=name),
                self.config.command_timeout_seconds,
            )
            v = Verification(code == 0, "passed" if code == 0 else out or f"exit {code}", 1.0)
        self._log(actor, "health_checked", name, passed=v.passed, reason=v.reason)
        return v

    def verify(self, name: str, targets: Mapping[str, str], actor: str) -> Verification:
        """Reboot finished, health command passed, record on ``targets``."""
        h = self.host(name)
        if not self.still_ours(name):
            return Verification(False, f"left our hands: {h.reason}", 0.0)
        self._set_state(h, S.VERIFYING, actor, "verifying")
        why = self._wait_reboot(name)
        if why:
            v = Verification(False, why, 0.0)
        else:
            v = self.health_check(name, actor)
            wrong = sorted(c for c, ver in targets.items() if h.versions.get(c) != ver)
            if v.passed and wrong:
                v = Verification(False, "version manifest mismatch: " + ",".join(wrong), 1.0)
        h.verified = v.passed
        self.dirty_hosts.add(name)
        self._log(actor, "verified", name, passed=v.passed, reason=v.reason, bus_bw=v.bus_bw)
        return v


__all__ = ["REBOOT_REASK_SECONDS", "REBOOT_WAIT_SECONDS", "VerifyOps"]
