"""The Slurm session's shared core: the record it holds, its clock, its event log and its reads.

``SlurmCore`` is what every part of ``SlurmCluster`` builds on: the host ledger both backends
share (``ledger.HostLedger``: trainctl's record of the nodes, the events and dirty hosts
``SlurmFleet`` saves at commit, ``_set_state`` and the changes that do not depend on Slurm),
with what Slurm adds: the backend state saved beside it (targets, reboots asked, job refusals,
weighted nodes), what the last ``sync`` read of Slurm (``nodes``, ``jobs``), wall-clock time and
the drain reason that names an owner, which tells trainctl's drains from anyone else's: a held
node whose reason is no longer trainctl's is handed over (``still_ours``). It is separate so
reconciling (``reconcile``), job control (``job_ops``), holds (``holds``), steering
(``steering``), installs (``install``) and verification (``verify``) each see the same small
base and nothing of one another beyond what they call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from orchestrator.contracts.constants import NO_OWNER
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import HostView, JobView
from orchestrator.fleet.ledger import HostLedger
from orchestrator.fleet.ledger_rules import holds_planned_work
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.commands import SlurmCommands, SlurmNode
from orchestrator.fleet.slurm.config import SlurmBackendConfig
from orchestrator.fleet.slurm.jobs import RunningJob

S = HostState
#: Every drain reason trainctl sets starts with this; the owner follows it.
REASON_PREFIX = "trainctl:"
#: The actor of events that record what Slurm did or showed (not what trainctl did).
SLURM_ACTOR = "slurm"


def taken_by_others(node: SlurmNode) -> bool:
    """Out of service with a reason that is not trainctl's: drained, downed or given a reason by
    an operator (or by Slurm itself, as for a job whose processes would not die). Slurm keeps
    trainctl's reason through the reboot it asks (``... : reboot issued : reboot complete``),
    and an out-of-service node with no reason at all is one a restarted controller has not
    heard from yet, not anyone's decision."""
    return node.out_of_service and bool(node.reason) and not node.reason.startswith(REASON_PREFIX)


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

    # ---------------------------------------------------- nodes others took
    def _out_by_others(self, h: HostRec, node: SlurmNode) -> None:
        """Out of service in the record as Slurm shows it, held by nobody: in repair when
        down, else quarantined, with Slurm's reason."""
        want = S.IN_REPAIR if node.down and not node.drained else S.QUARANTINED
        what = "drain" if node.drained else node.state
        why = f"slurm {what}" + (f": {node.reason}" if node.reason else "")
        if h.state != want or h.reason != why:
            self._set_state(h, want, SLURM_ACTOR, why, by="slurm")
            h.owner = NO_OWNER

    def _hand_over(self, h: HostRec, node: SlurmNode) -> None:
        """A node trainctl held that someone else drained or downed is theirs from now on: the
        record says who had it and the reason it has now (a ``handed_over`` entry), counts it
        out of service, held by nobody, and no step does anything more to it (no install,
        reboot or resume: its visit is not done). A reboot asked for it is forgotten, so
        verifying never asks it again."""
        self._log(
            SLURM_ACTOR, "handed_over", h.name, owner=h.owner, slurm=node.state, reason=node.reason
        )
        self.state.get("reboots", {}).pop(h.name, None)
        self._out_by_others(h, node)

    def _taken_now(self, name: str) -> SlurmNode | None:
        """The node as Slurm shows it now (read afresh) if someone else took it from trainctl,
        which holds it; else None (the record is not changed)."""
        h = self.host(name)
        node = next((n for n in self.cmd.nodes() if n.name == name), None)
        if node is None:
            return None
        self.nodes[name] = node
        return node if holds_planned_work(h.state, h.owner) and taken_by_others(node) else None

    def still_ours(self, name: str) -> bool:
        """Whether trainctl still holds the node, by what Slurm shows now: a step that waits on
        hooks or a reboot asks before each change it makes, so a node someone else drained or
        downed meanwhile is handed over (``_hand_over``), not changed."""
        h = self.host(name)
        node = self._taken_now(name)
        if node is not None:
            self._hand_over(h, node)
        return holds_planned_work(h.state, h.owner)

    # ------------------------------------------------------------------ reads
    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        return None if j is None else j.view(self._now)


__all__ = ["REASON_PREFIX", "SLURM_ACTOR", "SlurmCore", "taken_by_others"]
