"""Steering Slurm's placement with node weights, for a train's claim on due nodes.

Slurm places jobs itself, so trainctl cannot hold a freed node for a train the way the simulated
fleet does; it can only make Slurm prefer some nodes over others. Slurm allocates the lowest
``Weight`` first, so while a train's claim says ``visited_first``, nodes still due this cycle
get a high weight and visited ones keep the default: new jobs land on visited nodes, and the
nodes left idle are the due ones. Which nodes carry the high weight is kept with the backend
state (``due_weighted``), so only changed nodes are updated.
"""

from __future__ import annotations

from orchestrator.contracts.backend import PiggybackClaim
from orchestrator.contracts.views import visited_since
from orchestrator.fleet.slurm.core import SlurmCore

#: Node weights that steer jobs (``set_piggyback``): Slurm allocates the lowest weight first,
#: and 1 is slurm.conf's default, which visited nodes keep.
DEFAULT_WEIGHT = 1
DUE_WEIGHT = 100


class SteeringOps(SlurmCore):
    """``set_piggyback``: a train's steering claim as node weights."""

    def set_piggyback(self, claim: PiggybackClaim | None) -> None:
        """Slurm places jobs itself, the moment a node frees: a standing claim on freed hosts
        cannot be held there, so trains plan each domain as it comes. Its steering can be:
        with ``visited_first``, nodes still due this cycle get ``DUE_WEIGHT`` and visited ones
        the default ``Weight``, so Slurm puts new jobs on visited nodes first and due nodes
        are the ones left idle (Slurm cannot be told to place the longest job first). A
        withdrawn claim puts every weight back. Only changed nodes are updated."""
        due: set[str] = set()
        if claim is not None and claim.visited_first:
            since = claim.cycle_started_hours
            due = {n for n, h in self.hosts.items() if not visited_since(h, since)}
        weighted = set(self.state.get("due_weighted", []))
        if self.writable and due != weighted:
            if due - weighted:
                self.cmd.set_weight(sorted(due - weighted), DUE_WEIGHT)
            if weighted - due:
                self.cmd.set_weight(sorted(weighted - due), DEFAULT_WEIGHT)
            self.state["due_weighted"] = sorted(due)


__all__ = ["DEFAULT_WEIGHT", "DUE_WEIGHT", "SteeringOps"]
