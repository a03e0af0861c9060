"""Installing updates on held hosts, with retries: the one definition trains, operations
(forward and rollback) and the simulator use.

A transient install failure (on Slurm also a hook that timed out or crashed) is retried at once,
up to ``INSTALL_ATTEMPTS`` times (the package is staged, a retry costs no fleet time); a
permanent one, or the last transient one, marks the host failed with the component that broke
and why, and the caller quarantines it. A host that left our hands during its install (an
operator drained it) is reported lost, as one that left before it: nothing more is done to it.
Idempotent: a host already on its targets passes without a new install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from orchestrator.contracts.backend import ClusterBackend, InstallOutcome
from orchestrator.contracts.constants import HELD_STATES, INSTALL_ATTEMPTS
from orchestrator.contracts.messages import UpdateResult
from orchestrator.contracts.updates import host_targets, maintenance_hours, pending_components


def install_with_retries(
    b: ClusterBackend, name: str, targets: Mapping[str, str], owner: str, tag: str = ""
) -> InstallOutcome:
    """Install ``targets`` on one host, retrying transient failures; the last outcome."""
    out = InstallOutcome(True, False, None)
    for attempt in range(INSTALL_ATTEMPTS):
        out = b.install(name, targets, owner, f"{tag}{attempt}")
        if out.ok or out.permanent:
            break
    return out


def install_hosts(
    b: ClusterBackend,
    owner: str,
    targets: Mapping[str, Mapping[str, str]],
    rollback: bool = False,
    on_host: Callable[[str], None] | None = None,
) -> UpdateResult:
    """Install each host's ``targets[host]``; ``duration_hours`` is the longest install.

    Forward installs need the host held by ``owner`` and free of jobs; a rollback reopens a host
    whose new versions failed verification and reinstalls its previous ones.
    """
    out = UpdateResult(fleet_hours=b.now)
    verb = "rollback" if rollback else "update"
    for name, all_wanted in targets.items():
        if on_host is not None:
            on_host(name)
        wanted = host_targets(all_wanted)  # switch_firmware goes to the rack switch instead
        h = b.host(name)
        pending = pending_components(h.versions, wanted)
        if h.owner != owner or h.state not in HELD_STATES:
            out.failed[name] = f"not ours to {verb} ({h.state}, owner {h.owner or '-'})"
            out.lost[name] = out.failed[name]  # it left our hands before its install (repair)
            continue
        if rollback:
            if not pending:
                out.updated.append(name)
                continue
            b.begin_rollback(name, owner)
        elif not b.begin_update(name, owner):
            out.failed[name] = f"not ours to {verb} ({h.state}, owner {h.owner or '-'})"
            continue
        res = install_with_retries(b, name, wanted, owner, "rollback" if rollback else "")
        if res.ok:
            out.updated.append(name)
            took = maintenance_hours(pending) if res.duration_hours is None else res.duration_hours
            out.duration_hours = max(out.duration_hours, took)
        elif b.host(name).owner != owner:
            # Handed over during its install (an operator drained it): nothing more is ours.
            out.failed[name] = out.lost[name] = f"left our hands during its {verb}: {res.reason}"
        else:
            how = "permanently" if res.permanent else f"{INSTALL_ATTEMPTS} times"
            why = f": {res.reason}" if res.reason else ""
            out.failed[name] = f"{verb} of {res.failed_component} failed {how}{why}"
            out.failed_components[name] = res.failed_component or ""
    return out
