"""Installing software on a simulated host and checking it: the primitives both the
maintenance operations (``sim_maintenance``) and the repair pipeline (``sim_repair``, which
reimages a repaired host with the cluster's recorded targets) use.

Outcomes are seeded draws (``dynamics.draw_update_outcome``) plus injected bad builds
(``ClusterState.faults``); a diagnosis reads the host's hidden defect and versions the way
hardware diagnostics, a collective-bandwidth test and a version manifest would.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.contracts.updates import host_targets
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.sim_core import SimCore
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.topology import rack_switch


class HostInstall(SimCore):
    """Install and diagnose, each logged and marked dirty."""

    def apply_updates(
        self, name: str, targets: dict[str, str], actor: str, attempt: str
    ) -> dyn.UpdateOutcome:
        """Install every pending component of ``targets`` in dependency order, one reboot."""
        h = self.hosts[name]
        targets = host_targets(targets)  # switch firmware is the rack switch's, never a host's
        comps = dyn.pending_components(h.versions, targets)
        out = dyn.draw_update_outcome(self.seed, name, f"{h.updates}:{attempt}", comps)
        h.updates += 1
        self.dirty_hosts.add(name)
        if not out.ok:
            self._log(
                actor,
                "update_failed",
                name,
                component=out.failed_component,
                permanent=out.permanent,
            )
            return out
        before = {c: h.versions.get(c) for c in comps}
        # A new dict, never a change in place: loaded hosts share one per versions text.
        h.versions = {**h.versions, **{c: targets[c] for c in comps}}
        for c in comps:
            rate = self.state.faults.get(f"{c}={targets[c]}", 0.0)
            if rate and dyn.rng(self.seed, name, "fault", c, h.updates).random() < rate:
                out = dyn.UpdateOutcome(True, False, None, "low_bus_bandwidth")
        if out.defect:
            h.defect = out.defect
        h.last_boot = self.now  # the install ends with its one reboot
        after = {c: targets[c] for c in comps}
        # ``targets``: what the actor meant this host to carry (its own and a campaign's), so
        # the audit holds the return to the visit's targets, not to the owner's recorded ones.
        self._log(actor, "updated", name, before=before, after=after, targets=dict(targets))
        return out

    def _diagnose(self, h: HostRec, targets: Mapping[str, str]) -> tuple[bool, str, float]:
        """Diagnostics, collective bandwidth against roofline, version manifest."""
        r = dyn.rng(self.seed, h.name, "verify", h.updates)
        bw = (
            dyn.DEGRADED_BUS_BW
            if h.defect in ("slow_gpu", "low_bus_bandwidth")
            else dyn.HEALTHY_BUS_BW
        )
        bw += r.uniform(-0.02, 0.02)
        wrong = sorted(c for c, v in host_targets(targets).items() if h.versions.get(c) != v)
        switch = targets.get("switch_firmware")
        if switch is not None and self.switches[rack_switch(h.rack)] != switch:
            wrong.append("switch_firmware")  # the manifest names the rack switch it hangs off
        if h.defect == "xid_errors":
            return False, "diagnostics: GPU Xid errors under load", bw
        if bw < dyn.MIN_BUS_BW:
            return False, f"collective bandwidth {bw:.2f} of roofline < {dyn.MIN_BUS_BW}", bw
        if wrong:
            return False, "version manifest mismatch: " + ",".join(wrong), bw
        return True, "passed", bw
