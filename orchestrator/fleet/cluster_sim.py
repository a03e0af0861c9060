"""The simulated cluster: jobs, checkpoints, failures, repairs and host maintenance, in memory.

One ``ClusterSim`` is the whole truth about one cluster at fleet time ``now``. ``advance(t)``
replays what happens until ``t`` (jobs end and start, hosts fail and come back from repair);
the maintenance operations (cordon, evict, update, verify, return) act at ``now``. The SQLite
backend loads a ClusterSim, advances it to the caller's fleet time, applies one operation and
saves it, inside one transaction; the discrete-event simulator drives the very same class with
its own virtual clock. Every state change is appended to ``events`` for the audit log.

This module is the clock that ties the parts together, and the one name everyone imports; the
parts live beside it, each with one job:

- ``sim_records``: ``HostRec``, ``JobRec``, ``ClusterState`` and ``Event`` (re-exported here);
- ``sim_core``: ``SimCore``, the records held, the event log, ``_set_state`` and the reads;
- ``sim_scheduler``: ``JobScheduler``, trace draws, gang placement, backfill, job end/interrupt;
- ``sim_repair``: ``RepairPipeline``, failures, quarantine triage, repair and the way back;
- ``sim_maintenance``: ``MaintenanceOps``, the changes of the ``ClusterBackend`` Protocol;
- ``sim_health``: ``HealthChecks``, a host's health before its change, the base failure rate;
- ``sim_piggyback``: ``PiggybackOps``, a train's claim on due hosts a job's end or failure freed;
- ``sim_switches``: ``SwitchOps``, rack-switch firmware and its update (a whole rack drained).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.fleet.sim_health import HealthChecks
from orchestrator.fleet.sim_piggyback import PiggybackOps
from orchestrator.fleet.sim_records import ClusterState, Event, HostRec, JobRec
from orchestrator.fleet.sim_repair import QUARANTINE_TRIAGE_HOURS, RepairPipeline
from orchestrator.fleet.sim_scheduler import RESERVE_AFTER_HOURS
from orchestrator.fleet.sim_switches import SwitchOps

if TYPE_CHECKING:
    from orchestrator.contracts.backend import ClusterBackend

__all__ = [
    "QUARANTINE_TRIAGE_HOURS",
    "RESERVE_AFTER_HOURS",
    "ClusterSim",
    "ClusterState",
    "Event",
    "HostRec",
    "JobRec",
]


class ClusterSim(RepairPipeline, PiggybackOps, HealthChecks, SwitchOps):
    """One cluster's hosts and jobs, advanced through fleet time."""

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
        super().__init__(name, seed, hosts, jobs, state, max_job_hosts, target_utilisation)
        if state.next_failure_at <= 0.0:
            self._schedule_failure()

    def advance(self, t: float) -> None:
        """Replay jobs, failures and repairs up to fleet time ``t`` (never backwards)."""
        index = self._index  # the earliest job end and repair end, kept as records change
        while True:
            t_end, job = index.next_job_end()
            t_rep, host = index.next_repair(self.hosts)
            t_fail = self.state.next_failure_at
            t_next = min(t_end, t_rep, t_fail)
            if t_next > t:
                break
            self.state.now = max(self.state.now, t_next)
            if t_next == t_end and job is not None:
                self._finish_job(job)
            elif t_next == t_rep and host is not None:
                self._finish_repair(host)
            else:
                self._failure()
            self._fill_and_place()
        self.state.now = max(self.state.now, t)
        self._fill_and_place()


if TYPE_CHECKING:

    def _is_a_cluster_backend(sim: ClusterSim) -> ClusterBackend:
        """For mypy: the simulated cluster implements the whole backend Protocol."""
        return sim
