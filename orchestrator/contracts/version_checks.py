"""The version-policy fields of a spec checked as written: ``skew`` (how many versions of a
lower-layer component may serve at once) and ``supersedes`` (the older rollout a new one
replaces). What they mean against a fleet is ``planning.version_policy``'s.
"""

from __future__ import annotations

from orchestrator.contracts.models import SKEWED_COMPONENTS, check_version


def check_skew(value: object, field: str = "skew") -> dict[str, int]:
    """``skew: {os: 3, bios: 2}`` checked: known lower-layer components, whole numbers >= 1.

    See ``orchestrator.planning.version_policy`` for what the window means.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{field}: must map components to counts (e.g. {{os: 3}})")
    out: dict[str, int] = {}
    for comp, n in value.items():
        if comp not in SKEWED_COMPONENTS:
            raise ValueError(
                f"{field}.{comp}: not a lower-layer component the skew window counts "
                f"({', '.join(SKEWED_COMPONENTS)}); driver/CUDA stay one per job"
            )
        if isinstance(n, str) and n.isascii() and n.isdigit():  # specs keep numbers as text
            n = int(n)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100:
            raise ValueError(f"{field}.{comp}: must be a whole number from 1 to 100")
        out[comp] = n
    return out


def check_supersedes(value: object, field: str = "supersedes") -> dict[str, str]:
    """``supersedes: {os: "6.8.0-50"}``: the older rollout targets this one replaces."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{field}: must map components to the versions superseded")
    out: dict[str, str] = {}
    for comp, version in value.items():
        if comp not in SKEWED_COMPONENTS:
            raise ValueError(f"{field}.{comp}: only lower layers ({', '.join(SKEWED_COMPONENTS)})")
        out[comp] = check_version(f"{field}.{comp}", version)
    return out


def check_supersedes_targets(
    supersedes: dict[str, str], targets: dict[str, str], field: str = "supersedes"
) -> dict[str, str]:
    """An operation's or campaign's ``supersedes`` against its own targets: each superseded
    component must be one it targets (something has to replace the older rollout), with
    another version than the one it rolls out."""
    for comp, version in supersedes.items():
        if comp not in targets:
            raise ValueError(
                f"{field}.{comp}: the spec has no {comp} target to replace {version!r} with"
            )
        if targets[comp] == version:
            raise ValueError(f"{field}.{comp}: {version!r} is this spec's own target")
    return supersedes
