"""The simulated cluster's shared core: its records, its clock, its event log and its reads.

``SimCore`` is what every part of ``ClusterSim`` builds on: the hosts, jobs and cluster state it
holds, the dirty sets ``SqliteFleet`` saves, the one way a host changes state (``_set_state``,
which logs it) and the read-only views of the ``ClusterBackend`` Protocol. It is separate so that
the scheduler (``sim_scheduler``), the failure and repair model (``sim_repair``) and the
maintenance operations (``sim_maintenance``) each see the same small base and nothing of one
another's internals beyond what they call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.contracts.models import UPPER_LAYER, HostState
from orchestrator.contracts.views import ClusterSnapshot, JobView
from orchestrator.fleet.presets import INITIAL_SWITCH_FIRMWARE
from orchestrator.fleet.sim_index import JobTable, SimIndex
from orchestrator.fleet.sim_records import ClusterState, Event, HostRec, JobRec
from orchestrator.fleet.topology import rack_switch

S = HostState


class SimCore:
    """One cluster's hosts and jobs at fleet time ``now``, with the record of every change."""

    def __init__(
        self,
        name: str,
        seed: int,
        hosts: list[HostRec],
        jobs: dict[int, JobRec],
        state: ClusterState,
        max_job_hosts: int,
        target_utilisation: float,
    ) -> None:
        self.name = name
        self.seed = seed
        self.hosts = {h.name: h for h in hosts}
        self.order = [h.name for h in hosts]
        #: counters, sets and heaps every record write keeps current (``sim_index``)
        self._index = SimIndex(hosts)
        self.jobs: dict[int, JobRec] = JobTable(self._index, jobs)
        self.state = state
        self.max_job_hosts = max_job_hosts
        self.target_utilisation = target_utilisation
        self.events: list[Event] = []
        self.dirty_hosts: set[str] = set()
        self.dirty_jobs: set[int] = set()
        self.freed: list[str] = []  # hosts jobs left since the scheduler last placed (piggyback)
        self._racks: dict[str, list[str]] = defaultdict(list)
        for h in hosts:
            self._racks[h.rack].append(h.name)
        #: rack switch name -> its firmware (as built; ``SqliteFleet`` loads the stored ones)
        self.switches: dict[str, str] = {
            rack_switch(r): INITIAL_SWITCH_FIRMWARE for r in sorted(self._racks)
        }
        self.dirty_switches: set[str] = set()

    # ------------------------------------------------------------------ clock
    @property
    def now(self) -> float:
        return self.state.now

    # ------------------------------------------------------------- internals
    def _log(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self.events.append(Event(self.now, actor, kind, host, detail))

    def _set_state(
        self, h: HostRec, state: str, actor: str, reason: str = "", **extra: Any
    ) -> None:
        if h.state == state and h.reason == reason:
            return
        self._log(actor, "host_state", h.name, before=h.state, after=state, reason=reason, **extra)
        h.state = state
        h.reason = reason
        self.dirty_hosts.add(h.name)

    # ------------------------------------------------------ read-only views
    def out_of_service(self) -> list[HostRec]:
        return [h for h in self.hosts.values() if h.state != S.IN_SERVICE]

    def out_of_service_count(self) -> int:
        return self._index.down

    def busy_count(self) -> int:
        """Hosts running a job."""
        return self._index.busy

    def host_names(self) -> Sequence[str]:
        return self.order

    def host(self, name: str) -> HostRec:
        return self.hosts[name]

    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        return j.view(self.now) if j is not None and j.state == "running" else None

    def job_of(self, name: str) -> JobRec | None:
        jid = self.hosts[name].job_id
        return None if jid is None else self.jobs[jid]

    def recorded_targets(self) -> Mapping[str, str]:
        return self.state.targets

    def snapshot(self, cycle_started_hours: float | None = None) -> ClusterSnapshot:
        """Plain views in inventory order; ``due`` as ``views.is_due`` says for that cycle."""
        hosts = self._index.views_for(self.hosts, cycle_started_hours)
        now = self.now
        jobs = self._index.job_views(now)
        return ClusterSnapshot(self.name, now, len(hosts), hosts, jobs, dict(self.state.targets))

    def record(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self._log(actor, kind, host, **detail)

    def rack_hosts(self, rack: str) -> list[str]:
        return self._racks[rack]

    def upper_versions(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for h in self.hosts.values():
            counts[(h.versions["gpu_driver"], h.versions["cuda"])] += 1
        return dict(counts)


#: ``upper_versions`` here and the scheduler's placement group hosts by exactly these two.
assert {"gpu_driver", "cuda"} == UPPER_LAYER
