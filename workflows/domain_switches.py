"""A rack visit's switch step of ``DomainMaintenance``: update the drained rack's switch.

A part of the ``DomainMaintenance`` workflow (a mixin over its state), kept apart for size.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.messages import SwitchRequest, SwitchResult
    from orchestrator.contracts.train_types import DomainInput
    from orchestrator.contracts.ui_text import at_hour, names
    from workflows.fleet_timing import fleet_call, sleep_until


#: Tries at a rack switch whose rack is not fully out of service, SWITCH_RETRY_HOURS apart.
SWITCH_ATTEMPTS = 4
SWITCH_RETRY_HOURS = 0.25


class RackSwitches:
    """The rack switch step; the workflow class provides the state and the UI."""

    phase: str

    def _mark(self, hosts: list[str], phase: str, note: str) -> None:
        raise NotImplementedError

    def _show(self) -> None:
        raise NotImplementedError

    async def _update_switches(self, inp: DomainInput, hosts: list[str]) -> None:
        """Update the drained rack's switch and wait out its install and reboot. A switch that
        cannot be updated (a host came back from repair into service under it meanwhile) is
        tried again a few times; then this visit gives its hosts their own updates only."""
        version = inp.targets["switch_firmware"]
        self.phase = "updating rack switch"
        for attempt in range(SWITCH_ATTEMPTS):
            self._mark(hosts, "switch", f"rack switch to switch_firmware={version}")
            self._show()
            sw: SwitchResult = await fleet_call(
                FleetActivities.update_switches,
                SwitchRequest(
                    cluster=inp.cluster,
                    owner=inp.owner,
                    wall=workflow.now(),
                    hosts=hosts,
                    version=version,
                ),
                summary=f"update the rack switch above {names(hosts, 2)} to {version}",
            )
            if sw.done:
                if sw.duration_hours:
                    until = sw.fleet_hours + sw.duration_hours
                    self._mark(
                        hosts, "switch", f"switch reboots until {at_hour(until, sw.fleet_hours)}"
                    )
                    self._show()
                    await sleep_until(inp.clock, until, sw.fleet_hours)
                return
            why = "; ".join(f"{r}: {w}" for r, w in sw.racks.items() if w)
            workflow.logger.warning("rack switch not updated (attempt %d): %s", attempt + 1, why)
            await sleep_until(inp.clock, sw.fleet_hours + SWITCH_RETRY_HOURS, sw.fleet_hours)
        inp.targets = {c: v for c, v in inp.targets.items() if c != "switch_firmware"}
