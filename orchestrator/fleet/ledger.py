"""The host ledger both backends keep: one cluster's host records, their append-only record, and
every change of the ``ClusterBackend`` Protocol that is the same whoever runs the jobs.

``HostLedger`` is the base of the simulated cluster (``sim_core.SimCore``) and of the Slurm
session (``slurm.core.SlurmCore``). It holds the records (``hosts`` in inventory ``order``), the
entries appended since the session began (``events``) and the hosts written (``dirty_hosts``,
which the store saves), and applies the pure rules of ``ledger_rules``: the host state machine,
the owner rule and the budget-checked cordon. A backend supplies only what differs, through a
few hooks: where time comes from (``now``), where the recorded targets live, how the budget is
counted (``_load``), whether its scheduler lets a host go (``_may_take``), whether a held host
is still its holder's to give back (``_may_give_back``) and what it does to the scheduler when
a host is taken (``_take``) or given back (``_resume``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.constants import NO_OWNER, REPAIR_OWNER, UNTOUCHED_STATES
from orchestrator.contracts.errors import UnknownCluster
from orchestrator.contracts.updates import pending_components
from orchestrator.contracts.views import ClusterSnapshot, HostView, JobView
from orchestrator.fleet import ledger_rules as rules
from orchestrator.fleet.sim_records import HostRec

S = rules.S


class HostLedger:
    """One cluster's host records and their record of changes (see the module docstring)."""

    def __init__(self, name: str, hosts: list[HostRec]) -> None:
        self.name = name
        self.hosts = {h.name: h for h in hosts}
        self.order = [h.name for h in hosts]
        self.events: list[RecordEntry] = []
        self.dirty_hosts: set[str] = set()

    # ------------------------------------------------------- backend hooks
    @property
    def now(self) -> float:
        raise NotImplementedError

    def recorded_targets(self) -> Mapping[str, str]:
        raise NotImplementedError

    def _put_targets(self, targets: dict[str, str]) -> None:
        raise NotImplementedError

    def _job_views(self) -> dict[int, JobView]:
        """Running jobs' views at ``now``, by id."""
        raise NotImplementedError

    def _refusing_jobs(self, jobs: Mapping[int, JobView]) -> frozenset[int]:
        """Of the running ``jobs``, those that answer "not now" when asked (none known)."""
        return frozenset()

    def _host_views(self, cycle_started_hours: float | None) -> tuple[HostView, ...]:
        return tuple(rules.host_view(self.hosts[n], cycle_started_hours) for n in self.order)

    def _load(self, h: HostRec) -> rules.Load:
        """What a cordon of ``h`` is weighed against (a scan; an indexed backend counts faster)."""
        down = [d for d in self.hosts.values() if d.state != S.IN_SERVICE]
        return rules.Load(
            len(down),
            sum(d.rack == h.rack for d in down),
            sum(d.zone == h.zone for d in down),
            self.planned_count(),
        )

    def _may_take(self, h: HostRec) -> bool:
        """Whether the scheduler lets ``h`` go out of service now (besides its recorded state)."""
        return True

    def _take(self, h: HostRec, owner: str) -> None:
        """Tell the scheduler that ``owner`` takes ``h`` out of scheduling."""

    def _resume(self, h: HostRec) -> None:
        """Tell the scheduler that ``h`` serves again."""

    def _may_give_back(self, h: HostRec) -> bool:
        """Whether ``h`` is still its holder's to give back (a scheduler whose operators may
        have taken it meanwhile says no, and records the hand-over)."""
        return True

    # -------------------------------------------------------------- record
    def _log(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self.events.append(RecordEntry(self.now, actor, kind, host, detail))

    def _set_state(
        self, h: HostRec, state: str, actor: str, reason: str = "", **extra: Any
    ) -> None:
        """The one way a host changes state: logged, and the host marked for saving."""
        if h.state == state and h.reason == reason:
            return
        self._log(actor, "host_state", h.name, before=h.state, after=state, reason=reason, **extra)
        h.state = state
        h.reason = reason
        self.dirty_hosts.add(h.name)

    def record(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self._log(actor, kind, host, **detail)

    # --------------------------------------------------------------- reads
    def host_names(self) -> Sequence[str]:
        return self.order

    def host(self, name: str) -> HostRec:
        try:
            return self.hosts[name]
        except KeyError:
            raise UnknownCluster(f"host: unknown host {name!r} in {self.name}") from None

    def out_of_service_count(self) -> int:
        return sum(1 for h in self.hosts.values() if h.state != S.IN_SERVICE)

    def planned_count(self) -> int:
        """Hosts held for planned work (trains, operations, campaigns), whoever holds them."""
        return sum(1 for h in self.hosts.values() if rules.holds_planned_work(h.state, h.owner))

    def snapshot(self, cycle_started_hours: float | None = None) -> ClusterSnapshot:
        """Plain views in inventory order; ``due`` as ``views.is_due`` says for that cycle."""
        hosts = self._host_views(cycle_started_hours)
        jobs = self._job_views()
        return ClusterSnapshot(
            self.name,
            self.now,
            len(hosts),
            hosts,
            jobs,
            dict(self.recorded_targets()),
            self._refusing_jobs(jobs),
        )

    # ------------------------------------------------------------- targets
    def set_targets(self, targets: Mapping[str, str], actor: str) -> None:
        merged = {**self.recorded_targets(), **targets}
        if merged != self.recorded_targets():
            self._put_targets(merged)
            self._log(actor, "targets", None, targets=merged)

    def unset_targets(self, components: Sequence[str], actor: str) -> None:
        """Forget recorded targets (an operation that stopped stops pushing its versions)."""
        kept = {c: v for c, v in self.recorded_targets().items() if c not in components}
        if kept != self.recorded_targets():
            self._put_targets(kept)
            self._log(actor, "targets", None, targets=kept)

    # --------------------------------------------------------------- holds
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
        h = self.host(name)
        if h.state not in rules.CORDONABLE or not self._may_take(h):
            return False
        if not rules.cordon_allowed(self._load(h), limit, per_rack, per_zone, maintenance):
            return False
        self._take(h, owner)
        h.owner, h.verified = owner, False
        detail = rules.cordon_detail(owner, limit, per_rack, per_zone, maintenance, piggyback)
        self._set_state(h, S.CORDONED, actor, rules.cordon_reason(owner, piggyback), **detail)
        return True

    def start_drain(self, name: str, actor: str) -> None:
        h = self.host(name)
        if h.state in rules.DRAINABLE and h.job_id is not None:
            self._set_state(h, S.DRAINING, actor, "waiting for job")

    def begin_update(self, name: str, actor: str) -> bool:
        h = self.host(name)
        if h.state not in rules.UPDATABLE or h.job_id is not None:
            return False
        self._set_state(h, S.IN_MAINTENANCE, actor, "applying updates")
        return True

    def begin_rollback(self, name: str, actor: str) -> bool:
        """Reopen a host whose new versions failed, to reinstall its previous ones.

        Reinstalling the previous software removes what the failed install left behind (the
        defect a simulated host drew), which is the point of a rollback.
        """
        h = self.host(name)
        if h.state not in rules.ROLLBACKABLE or h.job_id is not None:
            return False
        h.defect, h.verified = None, False
        self.dirty_hosts.add(name)
        self._set_state(h, S.IN_MAINTENANCE, actor, "rolling back")
        return True

    def prestage(self, name: str, targets: Mapping[str, str], actor: str) -> list[str]:
        """Download the packages a host lacks while it stays in service; changes no state."""
        comps = pending_components(self.host(name).versions, targets)
        if comps:
            self._log(actor, "prestaged", name, components={c: targets[c] for c in comps})
        return comps

    def return_to_service(self, name: str, actor: str, visit: bool = True) -> bool:
        """Put a verified host back into service; ``visit`` marks it visited by a train."""
        h = self.host(name)
        if not h.verified or h.state not in rules.RETURNABLE or not self._may_give_back(h):
            return False
        self._resume(h)
        h.owner = NO_OWNER
        if visit:
            h.last_visit = self.now
        self._set_state(h, S.IN_SERVICE, actor, "returned after verification", verified=True)
        return True

    def check_in_place(self, name: str, actor: str) -> bool:
        """Record a serving host a train's cycle reached with nothing to do as visited (a
        ``checked`` entry): no cordon, no drain, no reboot; its jobs run on."""
        h = self.host(name)
        if h.state != S.IN_SERVICE or h.owner != NO_OWNER:
            return False
        h.last_visit = self.now
        self.dirty_hosts.add(name)
        self._log(actor, "checked", name, versions=dict(h.versions))
        return True

    def release(self, name: str, actor: str) -> None:
        """Give back a cordoned host that was never touched (a cancelled or aborted visit)."""
        h = self.host(name)
        if h.state in UNTOUCHED_STATES and h.owner != REPAIR_OWNER and self._may_give_back(h):
            self._resume(h)
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, actor, "released untouched", verified=True)

    def close_owner(self, owner: str, actor: str, outcome: str = "") -> None:
        """Record that ``owner`` (a train, operation or campaign) holds nothing more and ended."""
        if outcome:
            self._log(actor, "owner_closed", None, owner=owner, outcome=outcome)
        else:
            self._log(actor, "owner_closed", None, owner=owner)


__all__ = ["HostLedger"]
