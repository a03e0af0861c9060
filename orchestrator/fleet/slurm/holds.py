"""Who holds a Slurm node: the budget-checked cordon, and every hand-over after it.

A node trainctl holds is drained in Slurm with a reason naming its owner
(``scontrol update state=drain reason="trainctl:<owner> ..."``), so a drain outlives a failed
session and reconciling can tell trainctl's drains from an operator's. The changes of holder
both backends make alike (the budget-checked ``cordon``, ``return_to_service``, ``release``)
are the host ledger's (``ledger.HostLedger``); this module is what Slurm adds to them: the
drain a cordon sets (``_take``, refused for a node Slurm already shows out of service,
``_may_take``), the resume of a hand-back (``_resume``), and the hand-offs that keep a node
drained for someone else (``quarantine``, ``hand_to_repair``, ``reclaim`` for a rollback).
"""

from __future__ import annotations

from orchestrator.contracts.constants import (
    QUARANTINE_OWNER,
    REPAIR_OWNER,
)
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.core import S
from orchestrator.fleet.slurm.job_ops import JobOps
from orchestrator.fleet.slurm.reconcile import Reconciler


class HoldOps(Reconciler, JobOps):
    """Slurm's side of cordon, return and release; quarantine, reclaim and repair."""

    # ------------------------------------------------- the ledger's hooks
    def _may_take(self, h: HostRec) -> bool:
        """A node Slurm already shows out of service (an operator's drain, down) is not taken."""
        node = self.nodes.get(h.name)
        return node is not None and not node.out_of_service

    def _take(self, h: HostRec, owner: str) -> None:
        self.cmd.drain(h.name, self._reason(owner, "maintenance"))

    def _may_give_back(self, h: HostRec) -> bool:
        """Only a node Slurm still shows drained with trainctl's reason is resumed: one an
        operator drained or downed meanwhile keeps their state and reason (handed over)."""
        return self.still_ours(h.name)

    def _resume(self, h: HostRec) -> None:
        self.cmd.resume(h.name)
        node = self.nodes.get(h.name)
        if node is not None:
            self._publish(h, node)

    # ------------------------------------------------------------ hand-offs
    def quarantine(self, name: str, actor: str, reason: str) -> None:
        """Keep the node drained with trainctl's reason until a person triages it."""
        h = self.host(name)
        if h.state in (S.IN_REPAIR, S.QUARANTINED):
            return
        if h.job_id is not None and h.job_id in self.jobs:
            self.evict(h.job_id, actor)
        self.cmd.drain(name, self._reason(QUARANTINE_OWNER, reason))
        h.owner = QUARANTINE_OWNER
        self._set_state(h, S.QUARANTINED, actor, reason)

    def reclaim(self, name: str, actor: str, reason: str) -> bool:
        """A node trainctl quarantined after a bad build stays drained, now held by ``actor``
        (its reason says so) to roll it back; a node in repair is left to the people on it."""
        h = self.host(name)
        if h.state != S.QUARANTINED or h.job_id is not None:
            return False
        self.cmd.drain(name, self._reason(actor, reason))
        h.owner = actor
        self._set_state(h, S.IN_MAINTENANCE, actor, reason, owner=actor, reclaimed=True)
        return True

    def hand_to_repair(self, name: str, actor: str, reason: str) -> None:
        h = self.host(name)
        if h.state == S.IN_REPAIR:
            return
        if h.job_id is not None and h.job_id in self.jobs:
            self.evict(h.job_id, actor)
        self.cmd.drain(name, self._reason(REPAIR_OWNER, reason))
        h.owner, h.verified = REPAIR_OWNER, False
        self._set_state(h, S.IN_REPAIR, actor, reason)


__all__ = ["HoldOps"]
