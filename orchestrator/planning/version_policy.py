"""Which versions may be rolled out: the skew window, and versions known to be bad.

Two rules, checked before anything starts (a refusal names the field and the versions):

- **Skew.** While a lower layer rolls, a cluster serves several versions of it at once: the
  old one, the one rolling, maybe the one before. DESIGN.md's compatibility window bounds how
  many: ``skew: {os: 3, bios: 2}`` per component, default :data:`DEFAULT_SKEW` (old, rolling,
  new). A target that would put one more version in service than that is refused; a rollout
  that ``supersedes`` an older target re-targets the hosts still waiting for it instead, so
  that version leaves the count. Driver/CUDA are not counted here: they stay one per job
  (the bulk operation's consistency groups see to it).
- **Bad versions.** A version blamed for a failed stage, or marked by an operator, is bad
  fleet-wide until an operator clears it: no train, operation or campaign may target it.

Pure: the callers pass the hosts and the fleet's list of bad versions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from orchestrator.contracts.models import SKEWED_COMPONENTS, HostState
from orchestrator.contracts.views import HostView

#: Versions of one lower-layer component that may be in service in one cluster at once.
DEFAULT_SKEW = 3
#: Components the skew window counts (driver/CUDA are one per job, by other rules).
SKEWED = SKEWED_COMPONENTS


def versions_in_service(hosts: Iterable[HostView]) -> dict[str, dict[str, int]]:
    """component -> version -> hosts in service carrying it."""
    out: dict[str, dict[str, int]] = {}
    for h in hosts:
        if h.state != HostState.IN_SERVICE:
            continue
        for comp, version in h.versions.items():
            counts = out.setdefault(comp, {})
            counts[version] = counts.get(version, 0) + 1
    return out


def skew_refusal(
    hosts: Iterable[HostView],
    targets: Mapping[str, str],
    skew: Mapping[str, int] | None = None,
    supersedes: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """(field, message) if ``targets`` would exceed a component's skew window, else None.

    ``supersedes`` maps a component to the older target this rollout replaces: hosts still on
    the version before it are re-targeted, so the superseded version does not count.
    """
    live = versions_in_service(hosts)
    limits = skew or {}
    gone = supersedes or {}
    for comp in sorted(targets):
        if comp not in SKEWED:
            continue
        limit = limits.get(comp, DEFAULT_SKEW)
        serving = set(live.get(comp, {}))
        if comp in gone:
            serving.discard(gone[comp])
        after = serving | {targets[comp]}
        if len(after) > limit:
            shown = ", ".join(sorted(serving))
            return (
                f"targets.{comp}",
                f"targets.{comp}: {targets[comp]!r} would make {len(after)} {comp} versions in "
                f"service at once (now {shown}), over the skew window of {limit}; finish or "
                f"supersede an older rollout first (supersedes: {{{comp}: VERSION}}), or raise "
                f"skew.{comp}",
            )
    return None


def bad_version_refusal(
    targets: Mapping[str, str], bad: Iterable[tuple[str, str, str]]
) -> tuple[str, str] | None:
    """(field, message) if a target is a known-bad version, else None.

    ``bad`` holds (component, version, why) of every version marked bad in the fleet.
    """
    known = {(c, v): why for c, v, why in bad}
    for comp in sorted(targets):
        why = known.get((comp, targets[comp]))
        if why is not None:
            return (
                f"targets.{comp}",
                f"targets.{comp}: {targets[comp]!r} is marked bad fleet-wide ({why}); see "
                f"`trainctl versions list`, clear it with `trainctl versions clear "
                f"{comp}={targets[comp]} --reason ...` once fixed",
            )
    return None
