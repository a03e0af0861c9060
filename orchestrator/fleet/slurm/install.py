"""Installing components on a Slurm node: the config's hooks, in dependency order, then a reboot.

Slurm cannot install anything; the backend config names a hook per component (``config``). A
node held for maintenance runs each pending component's hook (a failure is permanent unless the
hook exits ``EX_TEMPFAIL``), the record keeps what succeeded even when a later hook fails, and
one reboot follows when any installed component needs it (``verify`` waits for it).

The upper layer is the exception: the GPU driver and CUDA must match on every host a job runs
on, and a job's hosts must never carry half a pair. So when a hook of one of them fails, the
ones of that layer that went in before it in the same install are put back on their previous
versions through the same hooks (the install is all or nothing for the pair), and the record
shows only what the node really carries.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.contracts.backend import InstallOutcome
from orchestrator.contracts.models import UPPER_LAYER
from orchestrator.contracts.updates import PROFILES, pending_components
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.config import EX_TEMPFAIL, render
from orchestrator.fleet.slurm.hooks import run_site_command
from orchestrator.fleet.slurm.verify import VerifyOps


class InstallOps(VerifyOps):
    """Prestage, begin an update or a rollback, and install."""

    def install(
        self, name: str, targets: Mapping[str, str], actor: str, attempt: str
    ) -> InstallOutcome:
        """Run each pending component's hook in dependency order, then one reboot. Before each
        of them Slurm is read again: a node an operator drained or downed while a hook ran is
        handed over (``still_ours``), with what went in before recorded, and nothing more runs."""
        h = self.host(name)
        comps = pending_components(h.versions, targets)
        h.updates += 1
        self.dirty_hosts.add(name)
        done: list[str] = []
        for c in comps:
            taken = self._taken_now(name)
            if taken is not None:  # what went in stays recorded, then the node is theirs
                self._partial(h, done, targets, actor, InstallOutcome(True, False, None))
                self._hand_over(h, taken)
                return InstallOutcome(False, True, None, reason=h.reason)
            failed = self._install_one(h, c, targets[c], actor)
            if failed is not None:
                done = self._undo_half_pair(h, c, done, actor)
                return self._partial(h, done, targets, actor, failed)
            done.append(c)
        self._partial(h, done, targets, actor, InstallOutcome(True, False, None))
        if self.config.reboot and any(PROFILES[c].needs_reboot for c in comps if c in PROFILES):
            if not self.still_ours(name):
                return InstallOutcome(False, True, None, reason=h.reason)
            self.reboot(name, actor)
        # The hooks ran for real; verification waits for the reboot itself.
        return InstallOutcome(True, False, None, duration_hours=0.0)

    def _install_one(self, h: HostRec, c: str, version: str, actor: str) -> InstallOutcome | None:
        """Run ``c``'s hook on the node: None once installed, else the failed outcome (its
        reason as the hook said it, or "timed out"/"crashed")."""
        hook = self.config.hook_for(c)
        if hook is None:
            why = "no hook for this component in the backend config"
            self._log(actor, "update_failed", h.name, component=c, permanent=True, reason=why)
            return InstallOutcome(False, True, c, reason=why)
        code, out = run_site_command(
            render(hook, node=h.name, component=c, version=version),
            self.config.command_timeout_seconds,
        )
        if code == 0:
            return None
        permanent = code != EX_TEMPFAIL
        why = out or f"hook exit code {code}"
        self._log(actor, "update_failed", h.name, component=c, permanent=permanent, reason=why)
        return InstallOutcome(False, permanent, c, reason=why)

    def _undo_half_pair(self, h: HostRec, failed: str, done: list[str], actor: str) -> list[str]:
        """When an upper-layer hook failed, reinstall the previous versions of the upper-layer
        components that went in before it; what stays installed (a revert that fails stays,
        and is recorded as the node now carrying it)."""
        if failed not in UPPER_LAYER:
            return done
        kept = []
        for c in done:
            previous = h.versions.get(c)
            hook = self.config.hook_for(c)
            if (
                c not in UPPER_LAYER
                or previous is None
                or hook is None
                or not self.still_ours(h.name)
            ):
                kept.append(c)
                continue
            code, out = run_site_command(
                render(hook, node=h.name, component=c, version=previous),
                self.config.command_timeout_seconds,
            )
            if code != 0:
                kept.append(c)
                self._log(
                    actor,
                    "update_failed",
                    h.name,
                    component=c,
                    permanent=True,
                    reason=f"putting back {c}={previous} after {failed} failed: "
                    + (out or f"hook exit code {code}"),
                )
        return kept

    def _partial(
        self,
        h: HostRec,
        done: list[str],
        targets: Mapping[str, str],
        actor: str,
        out: InstallOutcome,
    ) -> InstallOutcome:
        """Record the components whose hook succeeded (a later failure does not undo them)."""
        if done:
            before = {c: h.versions.get(c) for c in done}
            # A new dict, never a change in place: loaded hosts share one per versions text.
            h.versions = {**h.versions, **{c: targets[c] for c in done}}
            after = {c: targets[c] for c in done}
            self._log(actor, "updated", h.name, before=before, after=after, targets=dict(targets))
        return out


__all__ = ["InstallOps"]
