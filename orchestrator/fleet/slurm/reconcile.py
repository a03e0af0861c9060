"""Reconciling trainctl's record with what Slurm shows, at the start of every session.

Each ``cluster`` session reads Slurm (``sinfo``/``squeue``) before it acts, and makes the
record agree with it. Reconciling is what makes the record survive Slurm's own changes:

- a node drained or downed by someone else (an operator, Slurm's health check) is out of
  service with Slurm's reason (quarantined, or in repair when Slurm set it down), counts
  against every budget, and is never resumed by trainctl; when someone resumes it, it is back;
- so is a node trainctl holds once its reason is no longer trainctl's (drained, downed or given
  a reason by anyone else, at any step of its visit): it is handed over (``handed_over`` in the
  record, with the reason it has now) and nothing more is done to it; steps that wait on hooks
  or a reboot ask again before each change (``still_ours``);
- a node trainctl holds but Slurm no longer shows drained (the drain was lost) is drained again,
  and one drained with trainctl's reason but missing from the record (a session that failed
  after the drain) is adopted by the owner its reason names, who then hands it back;
- node features ``<component>_<version>`` follow the record, so they come back after a
  controller restart (which forgets features set by ``scontrol update``).
"""

from __future__ import annotations

import re

from orchestrator.contracts.constants import (
    NO_OWNER,
    NOT_MAINTENANCE_OWNERS,
    QUARANTINE_OWNER,
    REPAIR_OWNER,
)
from orchestrator.fleet.ledger_rules import holds_planned_work
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.commands import SlurmNode
from orchestrator.fleet.slurm.core import SLURM_ACTOR, S, SlurmCore, taken_by_others
from orchestrator.fleet.slurm.jobs import (
    RunningJob,
    declared_checkpoint_hours,
    declared_quiet_hours,
)

_REASON_OWNER = re.compile(r"^trainctl:(\S+)")


class Reconciler(SlurmCore):
    """``sync``: Slurm read, the record reconciled with it, features published."""

    # --------------------------------------------------------------- syncing
    def sync(self) -> None:
        """Read Slurm and reconcile the record with it (see the module docstring)."""
        nodes = {n.name: n for n in self.cmd.nodes()}
        jobs = self.cmd.jobs()
        self.nodes = nodes
        self.jobs = {}
        self.pending_jobs = sum(1 for j in jobs if j.state == "PENDING")
        on_node: dict[str, int] = {}
        for j in jobs:
            if not j.running or not j.nodes:
                continue
            ours = [n for n in j.nodes if n in self.hosts]
            if not ours:
                continue
            start = self._hours(j.start)
            self.jobs[j.id] = RunningJob(
                j,
                start,
                self._hours(j.end) if j.end > j.start else start + 24 * 365,
                declared_checkpoint_hours(j.comment),
                quiet_until_hours=declared_quiet_hours(
                    j.comment, self._anchor, start, self.config.max_quiet_hours
                ),
            )
            for n in ours:
                on_node.setdefault(n, j.id)
        self.freed = []
        for name in self.order:
            h = self.hosts[name]
            job = on_node.get(name)
            if job is None and h.job_id is not None:
                self.freed.append(name)  # a job's end left it idle (``piggyback``)
            if h.job_id != job:
                h.job_id = job
                self.dirty_hosts.add(name)
            node = nodes.get(name)
            if node is not None:
                self._reconcile(h, node)

    def _trainctl_out(self, h: HostRec) -> bool:
        """Quarantined or handed to repair by trainctl (not by someone else in Slurm)."""
        return h.owner in (QUARANTINE_OWNER, REPAIR_OWNER)

    def _reconcile(self, h: HostRec, node: SlurmNode) -> None:
        if holds_planned_work(h.state, h.owner):
            if not node.out_of_service and self.writable:
                # Held by trainctl, yet Slurm schedules on it: the drain was lost. Drain again.
                self.cmd.drain(h.name, self._reason(h.owner, "maintenance"))
                self._log(SLURM_ACTOR, "redrained", h.name, owner=h.owner, slurm=node.state)
            elif taken_by_others(node):
                self._hand_over(h, node)
            self._publish(h, node)
            return
        if self._trainctl_out(h) and node.out_of_service:
            self._publish(h, node)  # quarantined or in repair: a person resumes it in Slurm
            return
        m = _REASON_OWNER.match(node.reason)
        if node.drained and m and m.group(1) not in NOT_MAINTENANCE_OWNERS:
            if h.state == S.IN_SERVICE:
                # Drained by trainctl in a session whose record did not commit: the owner its
                # reason names holds it (and hands it back, as it does any orphan).
                h.owner = m.group(1)
                self._set_state(
                    h, S.CORDONED, SLURM_ACTOR, f"maintenance by {h.owner}", owner=h.owner
                )
            return
        if node.state == "unknown" and not node.drained:
            return  # a controller that just restarted has not heard from the node yet
        if node.drained or node.down:
            self._out_by_others(h, node)
        elif h.state != S.IN_SERVICE:
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, SLURM_ACTOR, "resumed in slurm", by="slurm")
        self._publish(h, node)

    def _publish(self, h: HostRec, node: SlurmNode) -> None:
        """Make the node's features say the versions trainctl recorded for it."""
        if not self.writable or not self.config.feature_components:
            return
        want = self._features(h, node)
        if sorted(want) == sorted(node.features):
            return
        self.cmd.set_features(h.name, want)
        self._log(SLURM_ACTOR, "features_applied", h.name, features=want)


__all__ = ["Reconciler"]
