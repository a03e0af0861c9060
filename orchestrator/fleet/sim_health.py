"""A simulated host's health before it is changed, and the fleet's base rate of change failures.

Two things a bulk operation needs to tell a bad host from a bad build (``planning.failure_gate``):

- ``health_check``: diagnostics and collective bandwidth of a held host *before* its change (no
  version manifest: it is not on the targets yet), recorded as a ``health_checked`` event, so a
  defect the host already had is seen as its own and never counted against the change. It
  changes no state: the host stays cordoned or drained, ready for ``begin_update``.
- ``change_failure_rate``: the chance that changing ``components`` fails on a healthy host
  (an install that fails permanently or on every retry, or one that leaves a defect only
  verification sees), read from the fleet's hardware fault rates (``dynamics.RISKS``, the
  preset's calibrated figures). It is the prior a real fleet would take from its own history
  of verification failures.
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.contracts.backend import Verification
from orchestrator.contracts.constants import INSTALL_ATTEMPTS
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.sim_install import HostInstall


def component_failure_rate(components: Iterable[str]) -> float:
    """P(a change of ``components`` fails install or verification) on a healthy host."""
    ok = 1.0
    for c in sorted(set(components)):
        r = dyn.RISKS.get(c)
        if r is None:
            continue
        # A transient failure is retried; only all attempts failing leaves the host failed.
        install_fails = r.permanent_failure + r.transient_failure**INSTALL_ATTEMPTS
        ok *= (1.0 - install_fails) * (1.0 - r.bad_return)
    return 1.0 - ok


class HealthChecks(HostInstall):
    """Health before a change, and the base rate of change failures."""

    def health_check(self, name: str, actor: str) -> Verification:
        """Diagnostics and bandwidth of a held host before its change; logged, no state change."""
        h = self.hosts[name]
        ok, why, bw = self._diagnose(h, {})
        self._log(actor, "health_checked", name, passed=ok, reason=why, bus_bw=round(bw, 3))
        return Verification(ok, why, bw)

    def change_failure_rate(self, components: Iterable[str]) -> float:
        """The fleet's base rate of failures when ``components`` change on a healthy host."""
        return component_failure_rate(components)
