"""The update catalogue: how long installing each component takes, whether it reboots, and what
it depends on (BMC before BIOS, kernel before driver).

A domain fact, not a simulation detail: planners estimate durations from it, the execution core
waits it out in fleet time, and the simulated fleet draws its install outcomes per component on
top of it (``fleet.dynamics``). Pure data and functions; every layer may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.contracts.models import Component, Update

REBOOT_HOURS = 0.25
VERIFY_HOURS = 0.5


@dataclass(frozen=True)
class UpdateProfile:
    """Installing one component on a host: fleet hours, reboot, dependencies."""

    duration_hours: float
    needs_reboot: bool
    depends_on: tuple[str, ...]


PROFILES: dict[str, UpdateProfile] = {
    "bmc": UpdateProfile(0.25, True, ()),
    "bios": UpdateProfile(0.35, True, ("bmc",)),
    "os": UpdateProfile(0.5, True, ()),
    "gpu_firmware": UpdateProfile(0.5, True, ("bmc",)),
    "nic_firmware": UpdateProfile(0.2, True, ()),
    "gpu_driver": UpdateProfile(0.25, True, ("os",)),
    "cuda": UpdateProfile(0.15, False, ("gpu_driver",)),
    "switch_firmware": UpdateProfile(0.5, True, ()),
}


def order_updates(components: list[str]) -> list[str]:
    """Order components so each comes after those it depends on (BMC before BIOS, ...)."""
    ordered: list[str] = []
    pending = set(components)

    def visit(c: str) -> None:
        if c in ordered:
            return
        for dep in PROFILES[c].depends_on:
            if dep in pending:
                visit(dep)
        ordered.append(c)

    for comp in sorted(components):
        visit(comp)
    return ordered


def update_catalog(targets: dict[str, str]) -> list[Update]:
    """The Update records for a target set, in dependency order."""
    return [
        Update(
            component=Component(c),
            target=targets[c],
            duration_hours=PROFILES[c].duration_hours,
            needs_reboot=PROFILES[c].needs_reboot,
            depends_on=[Component(d) for d in PROFILES[c].depends_on],
        )
        for c in order_updates(list(targets))
    ]


#: Components that live on switches, not hosts: a host install never carries them.
SWITCH_COMPONENTS: frozenset[str] = frozenset({"switch_firmware"})


def host_targets(targets: Mapping[str, str]) -> dict[str, str]:
    """The part of ``targets`` a host install applies (``switch_firmware`` is a switch's)."""
    return {c: v for c, v in targets.items() if c not in SWITCH_COMPONENTS}


def pending_components(versions: Mapping[str, str], targets: Mapping[str, str]) -> list[str]:
    """Components of ``targets`` a host with ``versions`` still lacks, in install order."""
    return order_updates([c for c, v in targets.items() if versions.get(c) != v])


def maintenance_hours(components: list[str]) -> float:
    """Fleet time to install ``components`` with one reboot, plus verification."""
    if not components:
        return VERIFY_HOURS
    install = sum(PROFILES[c].duration_hours for c in components)
    reboot = REBOOT_HOURS if any(PROFILES[c].needs_reboot for c in components) else 0.0
    return install + reboot + VERIFY_HOURS
