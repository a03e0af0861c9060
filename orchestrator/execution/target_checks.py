"""Targets checked against the fleet before anything starts: bad versions and the skew window.

The one place trains (start, reconfigure), operations (plan, start) and campaigns ask "may
these targets roll out here?", so every entry point refuses the same way: ``(field, message)``
naming ``targets.<component>`` and the versions, or None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from orchestrator.contracts.backend import FleetBackend
from orchestrator.fleet.bad_versions import active_bad
from orchestrator.planning.version_policy import bad_version_refusal, skew_refusal


def target_refusal(
    fleet: FleetBackend,
    clusters: Iterable[str],
    targets: Mapping[str, str],
    skew: Mapping[str, int] | None = None,
    supersedes: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """Why ``targets`` may not roll out on ``clusters`` of ``fleet`` now, or None."""
    if not targets:
        return None
    why = bad_version_refusal(targets, active_bad(fleet))
    if why is not None:
        return why
    clusters = list(clusters)
    why = hook_refusal(fleet, clusters, targets)
    if why is not None:
        return why
    why = supersedes_refusal(fleet, clusters, supersedes or {})
    if why is not None:
        return why
    for cluster in clusters:
        found = skew_refusal(fleet.peek(cluster).snapshot().hosts, targets, skew, supersedes)
        if found is not None:
            field, message = found
            return field, f"{message} (cluster {cluster})"
    return None


def supersedes_refusal(
    fleet: FleetBackend, clusters: list[str], supersedes: Mapping[str, str]
) -> tuple[str, str] | None:
    """``supersedes.<component>`` when nothing runs the version it names: no host of the
    clusters carries it and no cluster records it as a target (a typo would otherwise
    supersede nothing, silently, and the skew window would count the version it meant)."""
    for comp, old in sorted(supersedes.items()):
        carried = any(
            h.versions.get(comp) == old
            for cluster in clusters
            for h in fleet.peek(cluster).snapshot().hosts
        )
        recorded = any(fleet.peek(c).recorded_targets().get(comp) == old for c in clusters)
        if not carried and not recorded:
            return f"supersedes.{comp}", (
                f"supersedes.{comp}: nothing runs {comp}={old} on {', '.join(clusters)} (no host "
                "carries it and no train targets it): name the version being replaced"
            )
    return None


def hook_refusal(
    fleet: FleetBackend, clusters: Iterable[str], targets: Mapping[str, str]
) -> tuple[str, str] | None:
    """``hooks.<component>`` when the backend cannot install a target some host still needs
    (a Slurm backend config without its hook): refused before any node is touched."""
    can = fleet.installable_components()
    if can is None:
        return None
    for comp in sorted(c for c in targets if c not in can):
        needed = any(
            h.versions.get(comp) != targets[comp]
            for cluster in clusters
            for h in fleet.peek(cluster).snapshot().hosts
        )
        if needed:
            have = ", ".join(sorted(can)) or "none"
            return f"hooks.{comp}", (
                f"hooks.{comp}: the fleet's backend has no install hook for {comp} (hooks for: "
                f'{have}); add hooks.{comp} (or hooks."*") to the backend config '
                "(--backend-config of `trainctl fleet init --backend slurm`), or drop the target"
            )
    return None


def held_on_bad_version(fleet: FleetBackend, targets: Mapping[str, str]) -> str:
    """Why work installing ``targets`` must hold now (one was marked bad since it started), or
    ''. Trains and operations ask before each new domain or wave (every backend's store keeps
    the list)."""
    if not targets:
        return ""
    found = bad_version_refusal(targets, active_bad(fleet))
    if found is None:
        return ""
    comp = found[0].removeprefix("targets.")
    return (
        f"held: target {comp}={targets[comp]} is marked bad fleet-wide; clear it "
        f"(`trainctl versions clear {comp}={targets[comp]} --reason ...`) or change the target"
    )
