"""The simulated cluster's shared core: its records, its clock, its event log and its reads.

``SimCore`` is what every part of ``ClusterSim`` builds on: the host ledger both backends share
(``ledger.HostLedger``: the records, the append-only record, ``_set_state`` and the changes that
do not depend on how jobs run), with what the simulation adds: the jobs and cluster state it
holds, the dirty sets ``SqliteFleet`` saves, the incremental index the ledger's counts and views
are read from, and the simulated clock. It is separate so that
the scheduler (``sim_scheduler``), the failure and repair model (``sim_repair``) and the
maintenance operations (``sim_maintenance``) each see the same small base and nothing of one
another's internals beyond what they call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from orchestrator.contracts.job_comment import parse_job_comment, quiet_hours
from orchestrator.contracts.models import UPPER_LAYER, HostState
from orchestrator.contracts.views import HostView, JobView
from orchestrator.fleet.ledger import HostLedger
from orchestrator.fleet.ledger_rules import Load
from orchestrator.fleet.presets import INITIAL_SWITCH_FIRMWARE
from orchestrator.fleet.sim_index import JobTable, SimIndex
from orchestrator.fleet.sim_records import ClusterState, HostRec, JobRec
from orchestrator.fleet.topology import rack_switch

S = HostState


class SimCore(HostLedger):
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
        super().__init__(name, hosts)
        self.seed = seed
        #: counters, sets and heaps every record write keeps current (``sim_index``)
        self._index = SimIndex(hosts)
        self.jobs: dict[int, JobRec] = JobTable(self._index, jobs)
        self.state = state
        self.max_job_hosts = max_job_hosts
        self.target_utilisation = target_utilisation
        self.dirty_jobs: set[int] = set()
        #: the fleet's calendar (fleet hour 0), which a job's ``quiet_until=`` instant is read
        #: against; None where the fleet has none (``trainctl simulate``)
        self.anchor_wall: datetime | None = None
        self.freed: list[str] = []  # hosts jobs left since the scheduler last placed (piggyback)
        self._racks: dict[str, list[str]] = defaultdict(list)
        for h in hosts:
            self._racks[h.rack].append(h.name)
        #: rack switch name -> its firmware (as built; ``SqliteFleet`` loads the stored ones)
        self.switches: dict[str, str] = {
            rack_switch(r): INITIAL_SWITCH_FIRMWARE for r in sorted(self._racks)
        }
        self.dirty_switches: set[str] = set()

    # ------------------------------------------------- the ledger's hooks
    @property
    def now(self) -> float:
        return self.state.now

    def recorded_targets(self) -> Mapping[str, str]:
        return self.state.targets

    def _put_targets(self, targets: dict[str, str]) -> None:
        self.state.targets = targets

    def _job_views(self) -> dict[int, JobView]:
        return self._index.job_views(self.now)

    def _host_views(self, cycle_started_hours: float | None) -> tuple[HostView, ...]:
        return self._index.views_for(self.hosts, cycle_started_hours)

    def _load(self, h: HostRec) -> Load:
        index = self._index  # hosts out of service, in all and by rack and zone (sim_index)
        return Load(index.down, index.down_rack[h.rack], index.down_zone[h.zone], index.planned)

    # ------------------------------------------------------ read-only views
    def out_of_service(self) -> list[HostRec]:
        return [h for h in self.hosts.values() if h.state != S.IN_SERVICE]

    def out_of_service_count(self) -> int:
        return self._index.down

    def planned_count(self) -> int:
        """Hosts held for planned work (trains, operations, campaigns), whoever holds them."""
        return self._index.planned

    def busy_count(self) -> int:
        """Hosts running a job."""
        return self._index.busy

    def host(self, name: str) -> HostRec:
        return self.hosts[name]

    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        if j is None or j.state != "running":
            return None
        view = j.view(self.now)
        said = self.state.job_comments.get(str(job_id))
        if not said or j.start is None:
            return view
        q = parse_job_comment(said).quiet_until
        until = quiet_hours(q, self.anchor_wall, j.start, self.state.max_quiet_hours)
        return view if until is None else replace(view, quiet_until_hours=until)

    def job_of(self, name: str) -> JobRec | None:
        jid = self.hosts[name].job_id
        return None if jid is None else self.jobs[jid]

    def rack_hosts(self, rack: str) -> list[str]:
        return self._racks[rack]

    def upper_versions(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for h in self.hosts.values():
            counts[(h.versions["gpu_driver"], h.versions["cuda"])] += 1
        return dict(counts)


#: ``upper_versions`` here and the scheduler's placement group hosts by exactly these two.
assert {"gpu_driver", "cuda"} == UPPER_LAYER
