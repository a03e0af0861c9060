"""The simulated cluster's maintenance operations: the changes of the fleet-backend Protocol.

``MaintenanceOps`` is what trains and operations do to hosts at fleet time ``now`` (see
``orchestrator.contracts.backend.ClusterBackend``): record targets, cordon within the budget
(checked
in the same transaction, counting every host out for any reason), drain, ask and evict jobs,
prestage, install with seeded outcomes and bad builds (``dynamics.draw_update_outcome``, injected
faults), roll back, verify (diagnostics, bus bandwidth, version manifest), return or release.
Quarantine and hand-over to repair live with the repair pipeline (``sim_repair``). It is separate
from the scheduler and the failure model, which run on their own as fleet time passes; these run
only when a caller asks, and stop jobs only through the scheduler's ``_interrupt``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.contracts.backend import InstallOutcome, JobAnswer, RefusalNote, Verification
from orchestrator.contracts.constants import (
    NO_OWNER,
    PIGGYBACK_NOTE,
    REPAIR_OWNER,
    UNTOUCHED_STATES,
)
from orchestrator.contracts.errors import BadSpec
from orchestrator.contracts.models import HostState
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet import sim_negotiation
from orchestrator.fleet.sim_install import HostInstall
from orchestrator.fleet.sim_scheduler import JobScheduler

S = HostState


class MaintenanceOps(JobScheduler, HostInstall):
    """Host maintenance on one cluster, each change logged and marked dirty."""

    def set_targets(self, targets: Mapping[str, str], actor: str) -> None:
        merged = {**self.state.targets, **targets}
        if merged != self.state.targets:
            self.state.targets = merged
            self._log(actor, "targets", None, targets=merged)

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
        """Take a host out of scheduling for ``owner``, only if the budget still allows it.

        The budget is checked here, in the same transaction as the change, so a failure that
        landed since planning is respected: ``limit`` (the floor) counts every host out of
        service for any reason, ``maintenance`` the hosts held for planned work by every owner
        (``planned_count``). ``piggyback`` marks a host taken as a job's end or failure freed it.
        """
        h = self.hosts[name]
        if h.state != S.IN_SERVICE:
            return False
        index = self._index  # hosts out of service, in all and by rack and zone (sim_index)
        if index.down + 1 > limit:
            return False
        if maintenance is not None and index.planned + 1 > maintenance:
            return False
        if per_rack is not None and index.down_rack[h.rack] + 1 > per_rack:
            return False
        if per_zone is not None and index.down_zone[h.zone] + 1 > per_zone:
            return False
        h.owner, h.verified = owner, False
        self._set_state(
            h,
            S.CORDONED,
            actor,
            f"maintenance by {owner}" + (f" ({PIGGYBACK_NOTE})" if piggyback else ""),
            owner=owner,
            limit=limit,
            per_rack=per_rack,
            per_zone=per_zone,
            **({} if maintenance is None else {"maintenance": maintenance}),
            **({"piggyback": True} if piggyback else {}),
        )
        return True

    def planned_count(self) -> int:
        """Hosts held for planned work (trains, operations, campaigns), whoever holds them."""
        return self._index.planned

    def unset_targets(self, components: Sequence[str], actor: str) -> None:
        """Forget recorded targets (an operation that stopped stops pushing its versions)."""
        kept = {c: v for c, v in self.state.targets.items() if c not in components}
        if kept != self.state.targets:
            self.state.targets = kept
            self._log(actor, "targets", None, targets=kept)

    def prestage(self, name: str, targets: Mapping[str, str], actor: str) -> list[str]:
        """Download the packages a host lacks while it stays in service; changes no state."""
        comps = dyn.pending_components(self.hosts[name].versions, targets)
        if comps:
            self._log(actor, "prestaged", name, components={c: targets[c] for c in comps})
        return comps

    def begin_rollback(self, name: str, actor: str) -> bool:
        """Reopen a host whose new versions failed, to reinstall its previous ones.

        Reinstalling the previous software removes what the failed install left behind (the
        defect it drew), which is the point of a rollback; the reinstall draws its own outcome.
        """
        h = self.hosts[name]
        if h.state not in (S.IN_MAINTENANCE, S.VERIFYING) or h.job_id is not None:
            return False
        h.defect, h.verified = None, False
        self.dirty_hosts.add(name)
        self._set_state(h, S.IN_MAINTENANCE, actor, "rolling back")
        return True

    def reclaim(self, name: str, actor: str, reason: str) -> bool:
        """Take a host out of quarantine (or out of the repair its triage sent it to) into
        ``actor``'s maintenance, because the build it failed on was bad, not the host.

        A host that failed of its own (a hardware failure sent it to repair) is not taken:
        repair still owes it a fix. The host stays out of service (the floor is unchanged); its
        triage and repair are called off, and ``actor`` owns it until it returns or is
        quarantined again.
        """
        h = self.hosts[name]
        triaged = h.state == S.IN_REPAIR and h.reason.startswith("triaged after quarantine")
        if not (h.state == S.QUARANTINED or triaged) or h.job_id is not None:
            return False
        h.owner, h.repair_until = actor, None
        self.dirty_hosts.add(name)
        self._set_state(h, S.IN_MAINTENANCE, actor, reason, owner=actor, reclaimed=True)
        return True

    def inject_fault(self, component: str, version: str, rate: float, actor: str) -> None:
        """Make ``component=version`` a bad build that leaves hosts bad with ``rate``."""
        self.state.faults[f"{component}={version}"] = rate
        self._log(actor, "fault_injected", None, component=component, version=version, rate=rate)

    def close_owner(self, owner: str, actor: str, outcome: str = "") -> None:
        """Record that ``owner`` (a train or operation) holds nothing more and has ended (its
        piggyback claim, if any, ends with it)."""
        if self.state.piggyback.get("owner") == owner:
            self.state.piggyback = {}
        if outcome:
            self._log(actor, "owner_closed", None, owner=owner, outcome=outcome)
        else:
            self._log(actor, "owner_closed", None, owner=owner)

    def ask_job(self, job_id: int, actor: str, evict_at_hours: float) -> JobAnswer:
        """The job's owner answers as its behaviour says (``sim_negotiation``); a job no longer
        running has nothing to say against it."""
        job = self.jobs.get(job_id)
        if job is None or job.state != "running":
            return JobAnswer("go", reason="not running")
        pinned = self.state.job_behaviours.get(str(job_id))
        behaviour = pinned or sim_negotiation.draw_behaviour(
            self.seed, self.name, job_id, job.size
        )
        return sim_negotiation.answer(behaviour, job, self.now)

    def note_refusal(self, job_id: int, note: RefusalNote) -> None:
        job = self.jobs.get(job_id)
        if job is not None and job.state == "running":
            self.state.job_refusals[str(job_id)] = [note.until_hours, note.refusals]

    def refusal_notes(self) -> dict[int, RefusalNote]:
        return {
            int(j): RefusalNote(float(v[0]), int(v[1])) for j, v in self.state.job_refusals.items()
        }

    def start_drain(self, name: str, actor: str) -> None:
        h = self.hosts[name]
        if h.state == S.CORDONED and h.job_id is not None:
            self._set_state(h, S.DRAINING, actor, "waiting for job")

    def evict(self, job_id: int, actor: str, as_of: float | None = None) -> float:
        """Interrupt a job so its cordoned hosts can be maintained; return GPU-hours lost."""
        job = self.jobs[job_id]
        if job.state != "running":
            return 0.0
        return self._interrupt(job, cause=f"maintenance:{actor}", actor=actor, as_of=as_of)

    def begin_update(self, name: str, actor: str) -> bool:
        h = self.hosts[name]
        if h.state not in (S.CORDONED, S.DRAINING, S.IN_MAINTENANCE) or h.job_id is not None:
            return False
        self._set_state(h, S.IN_MAINTENANCE, actor, "applying updates")
        return True

    def install(
        self, name: str, targets: Mapping[str, str], actor: str, attempt: str
    ) -> InstallOutcome:
        if "switch_firmware" in targets:  # a host-level switch target: switches are not hosts
            raise BadSpec(
                "switch_firmware: a rack switch's firmware, not a host's; a train with a "
                "switch_firmware target updates the rack switch (the whole rack drained)",
                field="switch_firmware",
            )
        out = self.apply_updates(name, dict(targets), actor, attempt)
        return InstallOutcome(out.ok, out.permanent, out.failed_component)

    def reboot(self, name: str, actor: str) -> None:
        """A plain reboot: the simulated host comes back as it was, booted now."""
        self.hosts[name].last_boot = self.now
        self.dirty_hosts.add(name)
        self._log(actor, "rebooted", name)

    def verify(self, name: str, targets: Mapping[str, str], actor: str) -> Verification:
        """Hardware diagnostics, collective bandwidth against roofline, version manifest."""
        h = self.hosts[name]
        self._set_state(h, S.VERIFYING, actor, "verifying")
        ok, why, bw = self._diagnose(h, targets)
        h.verified = ok
        self.dirty_hosts.add(name)
        self._log(actor, "verified", name, passed=ok, reason=why, bus_bw=round(bw, 3))
        return Verification(ok, why, bw)

    def return_to_service(self, name: str, actor: str, visit: bool = True) -> bool:
        """Put a verified host back into service; ``visit`` marks it visited by a train."""
        h = self.hosts[name]
        if not h.verified or h.state != S.VERIFYING:
            return False
        h.owner = NO_OWNER
        if visit:
            h.last_visit = self.now
        self._set_state(h, S.IN_SERVICE, actor, "returned after verification", verified=True)
        return True

    def release(self, name: str, actor: str) -> None:
        """Give back a cordoned host that was never touched (a cancelled or aborted visit)."""
        h = self.hosts[name]
        if h.state in UNTOUCHED_STATES and h.owner != REPAIR_OWNER:
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, actor, "released untouched", verified=True)
