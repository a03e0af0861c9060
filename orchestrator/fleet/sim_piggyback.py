"""Failure piggybacking: due hosts a job's end or failure freed go to maintenance first.

Every unexpected failure already interrupts a job, and a job that ends frees its hosts: for a
moment those hosts run nothing. A train leaves a standing claim with the fleet (``set_piggyback``,
renewed each time it plans, lapsing an hour of fleet time later so a train that stopped planning
takes nothing more); when hosts come free, the fleet cordons the claim's due ones for the train,
in the same transaction and through the same ``cordon`` budget check (floor, maintenance budget,
per rack/zone, the train's own grant), *before* the scheduler places the next job on them. The
train finds them held for it at its next plan (``take_domain`` hands held hosts it did not know
about back to it first) and maintains them with no extra interruption. It is what Slurm's
``scontrol update state=DRAIN`` does for a node whose job runs: no new job once it is free.

The same claim steers the scheduler (``PiggybackClaim.visited_first``): while it is in force, new
and requeued jobs go to hosts already visited this cycle first, the longest job first, so the
idle hosts are the due ones (taken with no interruption) and a job that outlives the cycle does
not sit on hosts it must be stopped for (``JobScheduler._assign``). Idle due hosts are not held
back from jobs beyond the claim's room: that would cut interruptions only by leaving jobs waiting.
On meta-24k (seeds 1-4) steering took job-aware's interruptions from 26, 6, 7, 17 to 20, 2, 3, 7
(and to 16, 1, 2, 4 with ``EVICT_MIN_FILL`` retuned to it), utilisation unchanged.
"""

from __future__ import annotations

from orchestrator.contracts.backend import PiggybackClaim
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import is_due
from orchestrator.fleet.sim_maintenance import MaintenanceOps

S = HostState


class PiggybackOps(MaintenanceOps):
    """The fleet side of piggybacking: the claim, and the take before placing."""

    def set_piggyback(self, claim: PiggybackClaim | None) -> None:
        """Leave (or with None withdraw) the standing claim of a train on freed due hosts."""
        # ``claim.to_json()``'s fields as a plain copy (its ``asdict`` recursion, at every plan
        # of the simulator, cost more than the rest of this): the claim holds only scalars.
        self.state.piggyback = {} if claim is None else dict(vars(claim))

    def _visited_first_since(self) -> float | None:
        """The claim's cycle start while a claim in force steers jobs to visited hosts."""
        raw = self.state.piggyback
        if not raw or not raw.get("visited_first"):
            return None
        # Read off the stored claim (``PiggybackClaim.to_json``): asked before every placing.
        until, started = raw.get("until_hours", 0.0), raw["cycle_started_hours"]
        return None if until < self.now else started  # type: ignore[operator,return-value]

    def _before_placing(self) -> None:
        freed, self.freed[:] = list(self.freed), []
        raw = self.state.piggyback
        if not freed or not raw:
            return
        claim = PiggybackClaim(**raw)  # type: ignore[arg-type]
        if claim.until_hours < self.now:
            self.state.piggyback = {}
            return
        held = self._index.held_by[claim.owner]
        for name in dict.fromkeys(freed):
            if held >= claim.max_held:
                break
            h = self.hosts[name]
            if h.state != S.IN_SERVICE or h.job_id is not None:
                continue
            if not is_due(h, claim.cycle_started_hours):
                continue
            if self.cordon(
                name,
                claim.owner,
                claim.owner,
                claim.limit,
                claim.per_rack,
                claim.per_zone,
                claim.maintenance,
                piggyback=True,
            ):
                held += 1
