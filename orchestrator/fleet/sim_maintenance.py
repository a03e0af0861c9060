"""The simulated cluster's maintenance operations: the changes of the fleet-backend Protocol.

``MaintenanceOps`` is what trains and operations do to hosts at fleet time ``now`` (see
``orchestrator.contracts.backend.ClusterBackend``) that depends on the simulation: ask and evict
jobs (through the scheduler), install with seeded outcomes and bad builds
(``dynamics.draw_update_outcome``, injected faults), reclaim, verify (diagnostics, bus
bandwidth, version manifest). What both backends do alike (targets, the budget-checked cordon,
drain, begin an update or a rollback, prestage, return, release) is the host ledger's
(``ledger.HostLedger``). Quarantine and hand-over to repair live with the repair pipeline
(``sim_repair``). It is separate from the scheduler and the failure model, which run on their
own as fleet time passes; these run only when a caller asks, and stop jobs only through the
scheduler's ``_interrupt``.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.contracts.backend import InstallOutcome, JobAnswer, RefusalNote, Verification
from orchestrator.contracts.errors import BadSpec
from orchestrator.contracts.job_comment import parse_job_comment
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import JobView
from orchestrator.fleet import sim_negotiation
from orchestrator.fleet.sim_install import HostInstall
from orchestrator.fleet.sim_scheduler import JobScheduler

S = HostState


class MaintenanceOps(JobScheduler, HostInstall):
    """Host maintenance on one cluster, each change logged and marked dirty."""

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
        super().close_owner(owner, actor, outcome)

    def ask_job(self, job_id: int, actor: str, evict_at_hours: float) -> JobAnswer:
        """The job's owner answers as its behaviour says (``sim_negotiation``); a job no longer
        running has nothing to say against it."""
        job = self.jobs.get(job_id)
        if job is None or job.state != "running":
            return JobAnswer("go", reason="not running")
        said = self.state.job_comments.get(str(job_id), "")
        ignored = parse_job_comment(said).ignored if said else ()
        if ignored:  # as on Slurm: a word of the job grammar trainctl cannot read
            self._log(
                actor, "job_comment_ignored", None, job=job_id, text=said, ignored=list(ignored)
            )
        return sim_negotiation.answer(self._behaviour(job_id, job.size), job, self.now)

    def _behaviour(self, job_id: int, size: int) -> str:
        pinned = self.state.job_behaviours.get(str(job_id))
        return pinned or sim_negotiation.behaviour_of(self.seed, self.name, job_id, size)

    def _refusing_jobs(self, jobs: Mapping[int, JobView]) -> frozenset[int]:
        """The running jobs whose behaviour is to refuse (``sim_negotiation``)."""
        return frozenset(j for j, v in jobs.items() if self._behaviour(j, v.size) == "refuse")

    def note_refusal(self, job_id: int, note: RefusalNote) -> None:
        job = self.jobs.get(job_id)
        if job is not None and job.state == "running":
            self.state.job_refusals[str(job_id)] = [note.until_hours, note.refusals]

    def refusal_notes(self) -> dict[int, RefusalNote]:
        return {
            int(j): RefusalNote(float(v[0]), int(v[1])) for j, v in self.state.job_refusals.items()
        }

    def evict(self, job_id: int, actor: str) -> float:
        """Interrupt a job so its cordoned hosts can be maintained; return GPU-hours lost."""
        job = self.jobs[job_id]
        if job.state != "running":
            return 0.0
        return self._interrupt(job, cause=f"maintenance:{actor}", actor=actor)

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
