"""Updating rack switches during a rack visit: the one step trains (``DomainMaintenance``) and
the simulator take once a rack is drained, before its hosts get their own updates and verify.

Idempotent: a switch already on the version is left alone (a retried activity, or a host visited
alone after its rack was). The switch install takes the catalogue's fleet time (install plus its
reboot), which the caller waits out before verifying the hosts: their collective-bandwidth test
runs through the new switch, and their version manifest names its firmware.
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.contracts.backend import ClusterBackend
from orchestrator.contracts.messages import SwitchResult
from orchestrator.contracts.updates import PROFILES, REBOOT_HOURS

#: Fleet hours a rack switch update takes: install, then its reboot.
SWITCH_HOURS = PROFILES["switch_firmware"].duration_hours + REBOOT_HOURS
#: Tries at a rack switch whose rack is not fully out of service, SWITCH_RETRY_HOURS apart
#: (a host came back from repair under it meanwhile); then the visit updates its hosts only.
SWITCH_ATTEMPTS = 4
SWITCH_RETRY_HOURS = 0.25


def update_rack_switches(
    b: ClusterBackend, owner: str, hosts: Iterable[str], version: str
) -> SwitchResult:
    """Update the switch of every rack ``hosts`` sit in; per rack '' or why it was refused."""
    out = SwitchResult(fleet_hours=b.now)
    switches = b.rack_switches()
    for rack in sorted({b.host(h).rack for h in hosts}):
        before = switches.get(rack)
        why = b.update_switch(rack, version, owner)
        out.racks[rack] = why
        if not why and before != version:
            out.duration_hours = SWITCH_HOURS
    return out
