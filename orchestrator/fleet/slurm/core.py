"""The Slurm session's shared core: the record it holds, its clock, its event log and its reads.

``SlurmCore`` is what every part of ``SlurmCluster`` builds on: the host ledger both backends
share (``ledger.HostLedger``: trainctl's record of the nodes, the events and dirty hosts
``SlurmFleet`` saves at commit, ``_set_state`` and the changes that do not depend on Slurm),
with what Slurm adds: the backend state saved beside it (targets, reboots asked, job refusals,
weighted nodes), what the last ``sync`` read of Slurm (``nodes``, ``jobs``), wall-clock time and
the drain reason that names an owner. It is separate so reconciling (``reconcile``), job
control (``job_ops``), holds (``holds``), steering (``steering``), installs (``install``) and
verification (``verify``) each see the same small base and nothing of one another beyond what
they call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import HostView, JobView
from orchestrator.fleet.ledger import HostLedger
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.commands import SlurmCommands, SlurmNode
from orchestrator.fleet.slurm.config import SlurmBackendConfig
from orchestrator.fleet.slurm.jobs import RunningJob

S = HostState
#: Every drain reason trainctl sets starts with this; the owner follows it.
REASON_PREFIX = "trainctl:"
#: The actor of events that record what Slurm did or showed (not what trainctl did).
SLURM_ACTOR = "slurm"


class SlurmCore(HostLedger):
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
        super().__init__(name, hosts)
        self._now = now
        self._anchor = anchor  # Unix seconds of fleet hour 0
        self.state = state
        self.state.setdefault("targets", {})
        self.cmd = commands
        self.config = config
        self.writable = writable
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: dict[int, RunningJob] = {}
        self.pending_jobs = 0
        self.freed: list[str] = []  # nodes the last sync found a job's end had left idle

    # ------------------------------------------------------------------ clock
    @property
    def now(self) -> float:
        return self._now

    def _hours(self, unix: float) -> float:
        return (unix - self._anchor) / 3600.0

    # ------------------------------------------------- the ledger's hooks
    def recorded_targets(self) -> Mapping[str, str]:
        return self.state["targets"]

    def _put_targets(self, targets: dict[str, str]) -> None:
        self.state["targets"] = targets

    def _job_views(self) -> dict[int, JobView]:
        return {jid: j.view(self._now) for jid, j in self.jobs.items()}

    def _host_views(self, cycle_started_hours: float | None) -> tuple[HostView, ...]:
        """The ledger's views with each node's partitions as Slurm last showed them and its
        features as trainctl publishes them (none for a node Slurm did not list), for scopes by
        partition or feature: a version feature is the record's even before it is published."""
        views = super()._host_views(cycle_started_hours)
        out = []
        for v in views:
            node = self.nodes.get(v.name)
            if node is None:
                out.append(dataclasses.replace(v, partitions=(), features=()))
                continue
            h = self.hosts[v.name]
            feats = self._features(h, node) if self.config.feature_components else node.features
            out.append(dataclasses.replace(v, partitions=node.partitions, features=tuple(feats)))
        return tuple(out)

    def _features(self, h: HostRec, node: SlurmNode) -> list[str]:
        """The node's features as trainctl publishes them: Slurm's own, with the versions of
        the record as ``<component>_<version>`` in place of any it showed."""
        comps = self.config.feature_components
        kept = [f for f in node.features if not any(f.startswith(f"{c}_") for c in comps)]
        return kept + [f"{c}_{h.versions[c]}" for c in comps if c in h.versions]

    def _reason(self, owner: str, what: str) -> str:
        return f"{REASON_PREFIX}{owner} {what}"[:250]

    # ------------------------------------------------------------------ reads
    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        return None if j is None else j.view(self._now)


__all__ = ["REASON_PREFIX", "SLURM_ACTOR", "SlurmCore"]
