"""Who holds a Slurm node: the budget-checked cordon, and every hand-over after it.

A node trainctl holds is drained in Slurm with a reason naming its owner
(``scontrol update state=drain reason="trainctl:<owner> ..."``), so a drain outlives a failed
session and reconciling can tell trainctl's drains from an operator's. This module is every
change of holder: ``cordon`` (the budget counted in the same session as the drain, every node
out of service for any reason included), the drain's wait for the job, the hand-backs that
resume the node (``return_to_service`` after verification, ``release`` untouched), and the
hand-offs that keep it drained for someone else (``quarantine``, ``hand_to_repair``,
``reclaim`` for a rollback).
"""

from __future__ import annotations

from orchestrator.contracts.constants import (
    NO_OWNER,
    QUARANTINE_OWNER,
    REPAIR_OWNER,
    UNTOUCHED_STATES,
)
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.core import S
from orchestrator.fleet.slurm.job_ops import JobOps
from orchestrator.fleet.slurm.reconcile import Reconciler


class HoldOps(Reconciler, JobOps):
    """Cordon, drain, return, release, quarantine, reclaim, repair and close an owner."""

    # ---------------------------------------------------------------- cordons
    def cordon(
        self,
        name: str,
        owner: str,
        actor: str,
        limit: int,
        per_rack: int | None = None,
        per_zone: int | None = None,
        maintenance: int | None = None,
        piggyback: bool = False,
    ) -> bool:
        """Drain ``name`` for ``owner`` if the budget allows it, counting every node out of
        service for any reason, trainctl's or not (an operator's drain included)."""
        h = self.host(name)
        node = self.nodes.get(name)
        if h.state != S.IN_SERVICE or node is None or node.out_of_service:
            return False
        down = [d for d in self.hosts.values() if d.state != S.IN_SERVICE]
        if len(down) + 1 > limit:
            return False
        if maintenance is not None and self.planned_count() + 1 > maintenance:
            return False
        if per_rack is not None and sum(d.rack == h.rack for d in down) + 1 > per_rack:
            return False
        if per_zone is not None and sum(d.zone == h.zone for d in down) + 1 > per_zone:
            return False
        self.cmd.drain(name, self._reason(owner, "maintenance"))
        h.owner, h.verified = owner, False
        self._set_state(
            h,
            S.CORDONED,
            actor,
            f"maintenance by {owner}",
            owner=owner,
            limit=limit,
            per_rack=per_rack,
            per_zone=per_zone,
            **({} if maintenance is None else {"maintenance": maintenance}),
        )
        return True

    def start_drain(self, name: str, actor: str) -> None:
        h = self.host(name)
        if h.state == S.CORDONED and h.job_id is not None:
            self._set_state(h, S.DRAINING, actor, "waiting for job")

    def _resume(self, h: HostRec) -> None:
        self.cmd.resume(h.name)
        node = self.nodes.get(h.name)
        if node is not None:
            self._publish(h, node)

    def return_to_service(self, name: str, actor: str, visit: bool = True) -> bool:
        h = self.host(name)
        if not h.verified or h.state != S.VERIFYING:
            return False
        self._resume(h)
        h.owner = NO_OWNER
        if visit:
            h.last_visit = self._now
        self._set_state(h, S.IN_SERVICE, actor, "returned after verification", verified=True)
        return True

    def release(self, name: str, actor: str) -> None:
        h = self.host(name)
        if h.state in UNTOUCHED_STATES and h.owner != REPAIR_OWNER:
            self._resume(h)
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, actor, "released untouched", verified=True)

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

    def close_owner(self, owner: str, actor: str, outcome: str = "") -> None:
        if outcome:
            self._log(actor, "owner_closed", None, owner=owner, outcome=outcome)
        else:
            self._log(actor, "owner_closed", None, owner=owner)


__all__ = ["HoldOps"]
