"""Taking a whole rack for its switch update: plan with ``planning.rack_plan``, cordon every
in-service host below the switch, all or nothing, in the caller's transaction.

``take_domain`` calls this first for a train with a ``switch_firmware`` target: while any rack
switch of the cluster is off target the train visits racks, one domain per rack; once every
switch is on target it visits hosts again (a host that was in repair during its rack's visit is
due on its own, and its switch is already done).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.contracts.backend import ClusterBackend
from orchestrator.planning.rack_plan import choose_rack


@dataclass
class RackTaken:
    """The rack taken (its cordoned hosts), or why none; ``due`` rack switches off target."""

    rack: str | None = None
    hosts: list[str] = field(default_factory=list)
    waiting: str = ""
    due: int = 0


def take_rack(
    b: ClusterBackend,
    owner: str,
    target: str,
    limit: int,
    maintenance: int | None,
    held: int,
    max_held: int,
    max_wait_hours: float,
) -> RackTaken:
    """Cordon the next rack whose switch is due, if it fits the budget and the train's room
    (a train holding nothing always has room for one rack: the rack is the domain)."""
    snap = b.snapshot()
    plan = choose_rack(
        snap.hosts,
        snap.jobs,
        b.rack_switches(),
        target,
        limit,
        maintenance,
        snap.now,
        max_wait_hours,
    )
    out = RackTaken(due=plan.due_racks, waiting=plan.waiting)
    if plan.rack is None:
        return out
    if held and held + len(plan.hosts) > max_held:
        out.waiting = f"rack {plan.rack} waits for the rack in maintenance"
        return out
    cordoned: list[str] = []
    for name in plan.hosts:
        if not b.cordon(name, owner, owner, limit, None, None, maintenance):
            for back in cordoned:  # all or nothing: a half-drained rack keeps its switch busy
                b.release(back, owner)
            out.waiting = f"rack {plan.rack}: {name} could not be cordoned within the budget"
            return out
        cordoned.append(name)
    b.record(owner, "rack_taken", None, rack=plan.rack, hosts=cordoned, switch_target=target)
    out.rack, out.hosts = plan.rack, cordoned
    return out
