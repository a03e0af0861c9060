"""The Slurm session's shared core: the record it holds, its clock, its event log and its reads.

``SlurmCore`` is what every part of ``SlurmCluster`` builds on: trainctl's record of the nodes
(``HostRec``s from ``store``), the backend state saved beside it (targets, reboots asked, job
refusals, weighted nodes), what the last ``sync`` read of Slurm (``nodes``, ``jobs``), the
dirty set and events ``SlurmFleet`` saves at commit, the one way a node's recorded state
changes (``_set_state``, which logs it), the drain reason that names an owner, and the read-only
views of the ``ClusterBackend`` Protocol. It is separate so reconciling (``reconcile``), job
control (``job_ops``), holds (``holds``), steering (``steering``), installs (``install``) and
verification (``verify``) each see the same small base and nothing of one another beyond what
they call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.contracts.backend import RecordEntry
from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS
from orchestrator.contracts.errors import UnknownCluster
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import ClusterSnapshot, HostView, JobView, is_due
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.commands import SlurmCommands, SlurmNode
from orchestrator.fleet.slurm.config import SlurmBackendConfig
from orchestrator.fleet.slurm.jobs import RunningJob

S = HostState
#: Every drain reason trainctl sets starts with this; the owner follows it.
REASON_PREFIX = "trainctl:"
#: The actor of events that record what Slurm did or showed (not what trainctl did).
SLURM_ACTOR = "slurm"


class SlurmCore:
    """One Slurm cluster at wall-clock fleet hour ``now``: the record, the clock, the reads."""

    def __init__(
        self,
        name: str,
        now: float,
        anchor: float,
        hosts: list[HostRec],
        state: dict[str, Any],
        commands: SlurmCommands,
        config: SlurmBackendConfig,
        writable: bool,
    ) -> None:
        self.name = name
        self._now = now
        self._anchor = anchor  # Unix seconds of fleet hour 0
        self.hosts = {h.name: h for h in hosts}
        self.order = [h.name for h in hosts]
        self.state = state
        self.state.setdefault("targets", {})
        self.cmd = commands
        self.config = config
        self.writable = writable
        self.events: list[RecordEntry] = []
        self.dirty: set[str] = set()
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: dict[int, RunningJob] = {}
        self.pending_jobs = 0

    # ------------------------------------------------------------------ clock
    @property
    def now(self) -> float:
        return self._now

    def _hours(self, unix: float) -> float:
        return (unix - self._anchor) / 3600.0

    # ------------------------------------------------------------ internals
    def _log(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self.events.append(RecordEntry(self._now, actor, kind, host, detail))

    def _set_state(
        self, h: HostRec, state: str, actor: str, reason: str = "", **extra: Any
    ) -> None:
        if h.state == state and h.reason == reason:
            return
        self._log(actor, "host_state", h.name, before=h.state, after=state, reason=reason, **extra)
        h.state = state
        h.reason = reason
        self.dirty.add(h.name)

    def _reason(self, owner: str, what: str) -> str:
        return f"{REASON_PREFIX}{owner} {what}"[:250]

    def _held(self, h: HostRec) -> bool:
        return h.state in HELD_STATES and h.owner not in NOT_MAINTENANCE_OWNERS

    # ------------------------------------------------------------------ reads
    def host_names(self) -> Sequence[str]:
        return self.order

    def host(self, name: str) -> HostRec:
        try:
            return self.hosts[name]
        except KeyError:
            raise UnknownCluster(f"host: unknown host {name!r} in {self.name}") from None

    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        return None if j is None else j.view(self._now)

    def out_of_service_count(self) -> int:
        return sum(1 for h in self.hosts.values() if h.state != S.IN_SERVICE)

    def planned_count(self) -> int:
        return sum(1 for h in self.hosts.values() if self._held(h))

    def recorded_targets(self) -> Mapping[str, str]:
        return self.state["targets"]

    def snapshot(self, cycle_started_hours: float | None = None) -> ClusterSnapshot:
        c = cycle_started_hours
        hosts = tuple(
            HostView(
                h.name,
                h.rack,
                h.zone,
                str(h.state),
                h.owner,
                h.job_id,
                c is not None and is_due(h, c),
                h.versions,
                h.last_visit,
            )
            for h in (self.hosts[n] for n in self.order)
        )
        jobs = {jid: j.view(self._now) for jid, j in self.jobs.items()}
        return ClusterSnapshot(
            self.name, self._now, len(hosts), hosts, jobs, dict(self.state["targets"])
        )

    def record(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self._log(actor, kind, host, **detail)

    # ---------------------------------------------------------------- targets
    def set_targets(self, targets: Mapping[str, str], actor: str) -> None:
        merged = {**self.state["targets"], **targets}
        if merged != self.state["targets"]:
            self.state["targets"] = merged
            self._log(actor, "targets", None, targets=merged)

    def unset_targets(self, components: Sequence[str], actor: str) -> None:
        kept = {c: v for c, v in self.state["targets"].items() if c not in components}
        if kept != self.state["targets"]:
            self.state["targets"] = kept
            self._log(actor, "targets", None, targets=kept)


__all__ = ["REASON_PREFIX", "SLURM_ACTOR", "SlurmCore"]
