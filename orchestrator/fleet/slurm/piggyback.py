"""Piggybacking on Slurm: due nodes a job's end frees go to the train before the next job.

Slurm places jobs itself, the moment a node frees, so the simulated fleet's take-before-placing
(``sim_piggyback``) cannot be copied as it is. Two things make it hold on Slurm:

- the claim is kept with the backend state (``set_piggyback``), and every writable session,
  right after reading Slurm (``take_freed``, called from ``SlurmCluster.sync``), cordons the
  claim's due nodes that a job's end left idle (those the last session saw running a job, and
  those in trainctl's reservation), through the same budget-checked ``cordon`` as any take,
  recorded as piggybacked (``cordon(..., piggyback=True)``);
- a Slurm maintenance reservation (``flags=maint,ignore_jobs``, ``RESERVATION``) holds the due
  nodes of the next domain (up to the claim's ``max_held``, the jobs that end first, whole):
  their running jobs go on, but Slurm starts no new job there, so a node the job frees is
  still idle when trainctl next looks. It is kept to what the claim still wants (taken nodes
  leave it), lapses with the claim (its end is the claim's), and is deleted when the claim is
  withdrawn or finds nothing to hold.

Nodes drained or downed by anyone else are out of service in the record (``reconcile``) and are
never reserved or taken.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from orchestrator.contracts.backend import PiggybackClaim
from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.errors import PermanentError, SlurmUnknownObject
from orchestrator.contracts.views import is_due
from orchestrator.fleet.slurm.core import SLURM_ACTOR, S
from orchestrator.fleet.slurm.steering import SteeringOps

#: The reservation trainctl keeps on the due nodes of the next domain (one per cluster).
RESERVATION = "trainctl_piggyback"
#: The reservation is renewed when the claim outlasts it by more than this (fleet hours).
RENEW_HOURS = 0.25
#: After Slurm refused the reservation, trainctl asks again this much later (fleet hours).
RETRY_HOURS = 1.0


class PiggybackOps(SteeringOps):
    """The claim kept, freed due nodes taken, the next domain reserved."""

    def set_piggyback(self, claim: PiggybackClaim | None) -> None:
        super().set_piggyback(claim)  # the steering weights
        self.state["piggyback"] = {} if claim is None else claim.to_json()
        if self.writable:
            self._reserve(self._claim())

    def close_owner(self, owner: str, actor: str, outcome: str = "") -> None:
        """The owner's claim ends with it: weights back, reservation deleted."""
        if (self.state.get("piggyback") or {}).get("owner") == owner:
            self.set_piggyback(None)
        super().close_owner(owner, actor, outcome)

    def _claim(self) -> PiggybackClaim | None:
        raw: dict[str, Any] = self.state.get("piggyback") or {}
        if not raw:
            return None
        claim = PiggybackClaim(**raw)
        if claim.until_hours < self.now:
            self.state["piggyback"] = {}
            return None
        return claim

    def _held(self, owner: str) -> int:
        return sum(h.owner == owner and h.state in HELD_STATES for h in self.hosts.values())

    def take_freed(self) -> None:
        """Cordon, for the claim's owner, due nodes a job's end left idle (see the module)."""
        claim = self._claim()
        reserved = set(self.state.get("reserved", []))
        if claim is None:
            self._reserve(None)
            return
        held = self._held(claim.owner)
        limits = (claim.limit, claim.per_rack, claim.per_zone, claim.maintenance)
        for name in dict.fromkeys([*self.freed, *sorted(reserved)]):
            if held >= claim.max_held:
                break
            h = self.hosts.get(name)
            if h is None or h.job_id is not None or not is_due(h, claim.cycle_started_hours):
                continue
            held += self.cordon(name, claim.owner, claim.owner, *limits, piggyback=True)
        self._reserve(claim)

    def _wanted(self, claim: PiggybackClaim | None) -> list[str]:
        """The due nodes of the next domain: those reserved that a job's end left idle, then
        those running a job, the jobs ending first, whole; as many as the claim's
        ``max_held`` and the room under its floor, maintenance budget and per rack and zone
        limits (a reserved node that frees takes no job: it counts as out, as Slurm shows)."""
        if claim is None:
            return []
        out_hosts = [h for h in self.hosts.values() if h.state != S.IN_SERVICE]
        room = min(claim.max_held, claim.limit - len(out_hosts))
        if claim.maintenance is not None:
            room = min(room, claim.maintenance - self.planned_count())
        racks = Counter(h.rack for h in out_hosts)
        zones = Counter(h.zone for h in out_hosts)
        out: list[str] = []

        def fits(names: list[str]) -> bool:
            r = racks + Counter(self.hosts[n].rack for n in names)
            z = zones + Counter(self.hosts[n].zone for n in names)
            return (
                len(out) + len(names) <= room
                and (claim.per_rack is None or max(r.values(), default=0) <= claim.per_rack)
                and (claim.per_zone is None or max(z.values(), default=0) <= claim.per_zone)
            )

        since = claim.cycle_started_hours
        # Nodes it holds that a job's end left idle stay held until the train has room.
        idle = [
            n
            for n in self.state.get("reserved", [])
            if n in self.hosts and self.hosts[n].job_id is None and is_due(self.hosts[n], since)
        ]
        groups = [[n] for n in idle] + [
            [n for n in j.slurm.nodes if n in self.hosts and is_due(self.hosts[n], since)]
            for j in sorted(self.jobs.values(), key=lambda j: (j.end_hours, j.slurm.id))
        ]
        for names in groups:
            if names and fits(names):
                out += names
                racks.update(self.hosts[n].rack for n in names)
                zones.update(self.hosts[n].zone for n in names)
        return sorted(set(out))

    def _reserve(self, claim: PiggybackClaim | None) -> None:
        """Make the reservation hold ``_wanted`` nodes until the claim lapses (no node: no
        reservation). Best effort: a site that refuses it (no operator rights, say) gets
        piggybacking without it, and trainctl asks again ``RETRY_HOURS`` later."""
        if not self.writable or not self.config.piggyback_reservation:
            return
        if self.now < float(self.state.get("reservation_refused_at", -RETRY_HOURS)) + RETRY_HOURS:
            return
        want = self._wanted(claim)
        try:
            self._apply(claim, want)
        except PermanentError as err:
            self.state["reserved"] = []
            self.state["reservation_refused_at"] = self.now
            self._log(SLURM_ACTOR, "reservation_refused", None, nodes=want, error=str(err))

    def _apply(self, claim: PiggybackClaim | None, want: list[str]) -> None:
        """Create, update or delete the reservation; renewed only when its nodes change or the
        claim outlasts it by more than ``RENEW_HOURS``."""
        had = list(self.state.get("reserved", []))
        until = float(self.state.get("reserved_until", 0.0))
        if not want or claim is None:
            if had:
                self.cmd.delete_reservation(RESERVATION)
                self.state["reserved"] = []
                self._log(SLURM_ACTOR, "reservation_deleted", None, reservation=RESERVATION)
            return
        if want == had and claim.until_hours <= until + RENEW_HOURS:
            return
        # A reservation's duration runs from its start: kept with the state.
        since = float(self.state.get("reserved_since", self.now)) if had else self.now
        try:
            if not had:
                raise SlurmUnknownObject("no reservation yet", field="slurm")
            self.cmd.update_reservation(RESERVATION, want, _minutes(claim, since))
        except SlurmUnknownObject:  # none yet, or it lapsed: a new one from now
            self.cmd.delete_reservation(RESERVATION)
            since = self.now
            self.cmd.create_reservation(RESERVATION, want, _minutes(claim, since))
        self.state["reserved"] = want
        self.state["reserved_since"] = since
        self.state["reserved_until"] = since + _minutes(claim, since) / 60
        self._log(claim.owner, "reserved", None, reservation=RESERVATION, nodes=want)


def _minutes(claim: PiggybackClaim, since: float) -> int:
    """The reservation's duration from ``since`` to the claim's end, in whole minutes."""
    return max(1, math.ceil((claim.until_hours - since) * 60))


__all__ = ["RENEW_HOURS", "RESERVATION", "RETRY_HOURS", "PiggybackOps"]
