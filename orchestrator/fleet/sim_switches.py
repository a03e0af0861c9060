"""Rack switches of the simulated cluster: their firmware, and updating one.

A rack switch connects every host of its rack, so updating it takes all of them off the network
(its blast radius in the topology): the update is refused unless every host below it is out of
service, each either held by the updating owner free of jobs or down for another reason
(repair, quarantine). Spine and aggregation switches are not simulated here; their firmware
stays in the fleet's ``switches`` table as built.
"""

from __future__ import annotations

from orchestrator.contracts.models import HostState
from orchestrator.fleet.sim_core import SimCore
from orchestrator.fleet.topology import rack_switch


class SwitchOps(SimCore):
    """Rack-switch firmware per switch name (``rsw-<rack>``), each change logged."""

    def rack_switches(self) -> dict[str, str]:
        """rack -> the firmware of its switch."""
        return {rack: self.switches[rack_switch(rack)] for rack in sorted(self._racks)}

    def switch_blockers(self, rack: str, owner: str) -> list[str]:
        """Hosts of ``rack`` that keep its switch from being updated by ``owner``, with why."""
        out = []
        for name in self.rack_hosts(rack):
            h = self.hosts[name]
            if h.state == HostState.IN_SERVICE:
                out.append(f"{name} in service")
            elif h.owner == owner and h.job_id is not None:
                out.append(f"{name} still runs job {h.job_id}")
        return out

    def update_switch(self, rack: str, version: str, actor: str) -> str:
        """Install ``version`` on ``rack``'s switch; '' when done, else why it was refused."""
        if self.switches[rack_switch(rack)] == version:
            return ""  # already there (a retried call, or a host visited after its rack)
        blockers = self.switch_blockers(rack, actor)
        if blockers:
            return "rack not drained: " + ", ".join(blockers[:3])
        name = rack_switch(rack)
        before = self.switches[name]
        if before != version:
            self.switches[name] = version
            self.dirty_switches.add(name)
            hosts = self.rack_hosts(rack)
            self._log(
                actor,
                "switch_updated",
                None,
                switch=name,
                rack=rack,
                before=before,
                after=version,
                hosts=len(hosts),
            )
        return ""
