"""Health before the change: a host that is already bad is its own failure, not the change's.

Before a wave is changed, every held host is checked the way verification will check it
afterwards (hardware diagnostics and collective bandwidth; no version manifest, since it is not
on the targets yet) and the result is recorded in the fleet's log (``health_checked``). A host
that fails already is quarantined with that reason and is not changed, so it is neither counted
among the changed hosts nor among the failures the bad-build rule (``planning.failure_gate``)
judges. Idempotent: a host that already left our hands (quarantined by an earlier attempt, or
taken by repair) is reported as gone and not touched.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from orchestrator.contracts.backend import ClusterBackend
from orchestrator.contracts.constants import HELD_STATES
from orchestrator.execution.settle import quarantine_hosts


class HealthBaseline(BaseModel):
    """Hosts healthy before their change (with their bandwidth), and those already failing."""

    healthy: list[str] = Field(default_factory=list)
    #: host -> what the check found; quarantined, not changed, not counted against the change
    unhealthy: dict[str, str] = Field(default_factory=dict)
    gone: dict[str, str] = Field(default_factory=dict)  # left our hands before the check
    bus_bw: dict[str, float] = Field(default_factory=dict)  # healthy host -> fraction of roofline
    #: The fleet's base rate of failures for this change on a healthy host (see the gate).
    base_rate: float = 0.0


def check_before_change(
    b: ClusterBackend, owner: str, hosts: Iterable[str], prefix: str
) -> HealthBaseline:
    """Check each held host before its change; quarantine (``prefix: why``) those failing."""
    out = HealthBaseline()
    for name in hosts:
        h = b.host(name)
        if h.owner != owner or h.state not in HELD_STATES:
            out.gone[name] = f"left maintenance: {h.state} {h.reason}".strip()
            continue
        v = b.health_check(name, owner)
        if v.passed:
            out.healthy.append(name)
            out.bus_bw[name] = round(v.bus_bw, 3)
        else:
            out.unhealthy[name] = f"failing before the change: {v.reason}"
    quarantine_hosts(b, owner, out.unhealthy, prefix)
    return out
