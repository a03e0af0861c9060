"""The simulated cluster's failures and repair pipeline: how hosts break, leave and come back.

``RepairPipeline`` draws unexpected failures from the seeded failure process
(``dynamics.next_failure_gap`` / ``draw_failure``; a host already down cannot fail again), sends
failed hosts to repair, and brings repaired hosts back into service, reimaged with every target
recorded for the cluster (a train's lower layers, an operation's driver/CUDA) and burnt in
first, so a repaired host never serves on stale versions and never waits for an owner that may
have ended; a reimage that fails keeps the host in repair for another round. Hosts also enter
it on purpose: ``quarantine``
(a person triages the host for ``QUARANTINE_TRIAGE_HOURS``, then it goes to repair) and
``hand_to_repair`` (straight to repair). It is separate from the scheduler, whose jobs it only
interrupts, and from the maintenance operations, which never bring a host back from repair.
"""

from __future__ import annotations

from orchestrator.contracts.constants import (
    NO_OWNER,
    QUARANTINE_OWNER,
    REPAIR_OWNER,
    REPAIR_STATES,
)
from orchestrator.contracts.models import HostState
from orchestrator.contracts.updates import host_targets
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.sim_install import HostInstall
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.sim_scheduler import JobScheduler

S = HostState
#: States in which a host is powered up and exposed to unexpected failures.
_CAN_FAIL = frozenset({S.IN_SERVICE, S.CORDONED, S.DRAINING})
#: Hours a quarantined host waits for a person to triage it before it goes to repair.
QUARANTINE_TRIAGE_HOURS = 8.0


class RepairPipeline(JobScheduler, HostInstall):
    """Failures drawn through fleet time, quarantine triage, repair and the way back."""

    def _schedule_failure(self) -> None:
        gap = dyn.next_failure_gap(self.seed, self.name, self.state.fail_seq, len(self.order))
        self.state.next_failure_at = self.state.now + gap

    def _failure(self) -> None:
        host, cause, repair = dyn.draw_failure(
            self.seed, self.name, self.state.fail_seq, self.order
        )
        self.state.fail_seq += 1
        self._schedule_failure()
        h = self.hosts[host]
        if h.state not in _CAN_FAIL:
            return  # thinning: hosts down already cannot fail again
        self._log("fleet", "failure", host, cause=cause, repair_hours=round(repair, 3))
        if h.job_id is not None:
            self._interrupt(self.jobs[h.job_id], cause=f"failure:{cause}", actor="fleet")
        h.repair_until = self.now + repair
        h.owner = REPAIR_OWNER
        h.verified = False
        self._set_state(h, S.IN_REPAIR, "fleet", cause)

    def _finish_repair(self, h: HostRec) -> None:
        if h.state == S.QUARANTINED:
            # Triage done: the repair pipeline takes the host (reseat, swap, reflash).
            r = dyn.rng(self.seed, h.name, "quarantine-repair", h.updates)
            h.repair_until = self.now + r.uniform(12.0, 48.0)
            h.owner = REPAIR_OWNER
            self.dirty_hosts.add(h.name)
            self._set_state(h, S.IN_REPAIR, "repair", f"triaged after quarantine: {h.reason}")
            return
        h.repair_until = None
        h.defect = None
        self.dirty_hosts.add(h.name)
        # Every recorded target over the host's own (a rolled-back build's previous versions);
        # a rack switch is no part of a reimage.
        targets = host_targets({**self.state.reimage.get(h.name, {}), **self.state.targets})
        pending = dyn.pending_components(h.versions, targets)
        note = "repaired"
        if pending:
            # Reimage with every recorded target, then burn in, before it serves again.
            out = self.apply_updates(h.name, targets, REPAIR_OWNER, "reimage")
            if out.ok:
                ok, why, bw = self._diagnose(h, targets)
            else:
                ok, why, bw = False, f"reimage of {out.failed_component} failed", 0.0
            self._log(REPAIR_OWNER, "verified", h.name, passed=ok, reason=why, bus_bw=round(bw, 3))
            if not ok:
                h.defect = None
                r = dyn.rng(self.seed, h.name, "reimage-retry", h.updates)
                h.repair_until = self.now + r.uniform(2.0, 12.0)
                self._set_state(h, S.IN_REPAIR, REPAIR_OWNER, f"reimage failed ({why}); repairing")
                return
            note = "repaired and reimaged with " + ",".join(pending)
        h.owner = NO_OWNER
        self.state.reimage.pop(h.name, None)
        self._set_state(h, S.IN_SERVICE, REPAIR_OWNER, note)

    def quarantine(self, name: str, actor: str, reason: str) -> None:
        h = self.hosts[name]
        if h.state == S.IN_REPAIR:
            return  # already held by the repair pipeline
        if h.job_id is not None:
            self._interrupt(self.jobs[h.job_id], cause=f"quarantine:{actor}", actor=actor)
        h.owner = QUARANTINE_OWNER
        # Not a visit: once repaired the host is due again, and verified before it serves.
        h.repair_until = self.now + QUARANTINE_TRIAGE_HOURS
        self._set_state(h, S.QUARANTINED, actor, reason)

    def set_reimage(self, name: str, versions: dict[str, str], actor: str) -> bool:
        """A host out of service gets ``versions`` from its reimage on the way back from
        repair (under the recorded targets): a rollback of a host the repair pipeline holds."""
        h = self.hosts[name]
        if h.state not in REPAIR_STATES:
            return False
        self.state.reimage[name] = {**self.state.reimage.get(name, {}), **versions}
        self._log(actor, "reimage_set", name, versions=dict(versions))
        return True

    def hand_to_repair(self, name: str, actor: str, reason: str) -> None:
        """Give a host to the repair pipeline now (no triage wait): it returns when repaired."""
        h = self.hosts[name]
        if h.state == S.IN_REPAIR:
            return
        if h.job_id is not None:
            self._interrupt(self.jobs[h.job_id], cause=f"repair:{actor}", actor=actor)
        r = dyn.rng(self.seed, h.name, "hand-to-repair", h.updates)
        h.repair_until = self.now + r.uniform(12.0, 48.0)
        h.owner, h.verified = REPAIR_OWNER, False
        self._set_state(h, S.IN_REPAIR, actor, reason)
