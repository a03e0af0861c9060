"""The bulk-operation planner's results: waves, per-cluster plans, the whole plan, holders.

``OperationPlan`` is what ``ops plan --json`` prints and what the bulk-operation workflows execute
wave by wave (it travels through Temporal as a pydantic model, so its fields keep their meaning);
``Holder`` is another campaign holding hosts, which serialises the operation. They are separate
from the planning steps (``ops_scope``, ``ops_packing``, ``ops_estimate``, ``ops_plan``) so that
executors and clients can name the shapes without the planner, and so the people-facing
``summary`` text sits with the fields it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, computed_field

from orchestrator.contracts.ui_text import duration


@dataclass(frozen=True)
class Holder:
    """Another campaign (train or operation) holding hosts of a cluster right now."""

    holder_id: str
    cluster: str
    hosts: int
    scope: str = ""


class Wave(BaseModel):
    """Hosts of one cluster taken out, changed, verified and returned together."""

    index: int = Field(description="position among the waves of its cluster, from 0")
    cluster: str
    hosts: list[str]
    #: Hosts of jobs that refuse to be drained: the wave asks them and hands them back to a
    #: later wave (which lists them in ``hosts``).
    asked: list[str] = Field(default_factory=list)
    jobs_affected: list[int] = Field(default_factory=list)
    jobs_interrupted: list[int] = Field(default_factory=list)
    est_start_hours: float = 0.0  # after the operation starts
    drain_hours: float = 0.0
    est_hours: float = 0.0  # drain wait + maintenance

    @computed_field  # type: ignore[prop-decorator]
    @property
    def number(self) -> int:
        """The wave's number as people read it, from 1 (as progress and failures count)."""
        return self.index + 1


class ClusterPlan(BaseModel):
    """Per-cluster view: budget in force and what the operation does there."""

    cluster: str
    hosts_total: int
    hosts_in_scope: int
    out_of_service: int
    budget_limit: int
    wave_cap: int
    hosts_to_change: int
    already_done: int
    deferred: int
    waves: int
    est_hours: float
    refused: str | None = None
    #: Why its first wave must wait for room (outages fill the budget today), if it must.
    waiting_for_room: str | None = None
    #: Hosts the cluster's capacity arbiter would grant the operation now (the waves' size);
    #: None when it was not asked (no server answering): then waves may be smaller.
    granted_hosts: int | None = None
    #: Jobs its waves stop, low and high (``OperationPlan.jobs_interrupted_range``).
    jobs_interrupted_range: list[int] = Field(default_factory=lambda: [0, 0])


class OperationPlan(BaseModel):
    """A dry run of an operation; what ``ops plan --json`` prints and the executor runs."""

    operation_id: str
    kind: str
    consistency: str
    targets: dict[str, str]
    fleet_hours: float
    hosts_total: int = Field(description="hosts in the scope")
    hosts_to_change: int = Field(description="hosts in waves plus deferred ones")
    waves: list[Wave]
    already_done: list[str]
    deferred: list[str]
    clusters: list[ClusterPlan]
    estimated_duration_hours: float
    gpu_hours_out_of_service: float
    gpu_hours_lost: float = Field(description="work lost by evictions since a checkpoint")
    jobs_affected: int
    jobs_interrupted: int = Field(description="today's running jobs the waves stop")
    #: Jobs stopped, low and high: today's and the new jobs expected on hosts idle until their
    #: wave (high at most twice low plus two); duration and work lost, low and high, the same way.
    jobs_interrupted_range: list[int] = Field(default_factory=lambda: [0, 0])
    estimated_duration_range_hours: list[float] = Field(default_factory=lambda: [0.0, 0.0])
    gpu_hours_lost_range: list[float] = Field(default_factory=lambda: [0.0, 0.0])
    conflicts: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    refused: str | None = None

    def waves_of(self, cluster: str) -> list[Wave]:
        return [w for w in self.waves if w.cluster == cluster]

    def summary(self, max_waves: int = 12) -> str:
        """A few lines for people: scope, estimate, per-cluster budget, the first waves."""
        tgt = " ".join(f"{c}={v}" for c, v in self.targets.items()) or "-"
        in_waves = sum(len(w.hosts) for w in self.waves)
        lines = [
            f"{self.operation_id}: {self.kind} (consistency: {self.consistency}) targets {tgt}",
            f"scope: {_n(self.hosts_total, 'host')} in {_n(len(self.clusters), 'cluster')}; "
            f"{in_waves:,} to change in {_n(len(self.waves), 'wave')}, "
            f"{len(self.already_done):,} already done, "
            f"{len(self.deferred):,} deferred until repaired",
            f"estimate: {duration(self.estimated_duration_range_hours[0])} to "
            f"{duration(self.estimated_duration_range_hours[1])}, "
            f"{self.gpu_hours_out_of_service:,.0f} GPU-hours out of service, "
            f"{self.jobs_interrupted_range[0]} to {self.jobs_interrupted_range[1]} jobs "
            f"interrupted ({self.jobs_interrupted} of the {_n(self.jobs_affected, 'job')} "
            f"running now; {self.gpu_hours_lost:,.0f} GPU-hours of work lost)",
        ]
        for c in self.clusters:
            grant = "" if c.granted_hosts is None else f", the arbiter grants {c.granted_hosts}"
            lines.append(
                f"  {c.cluster}: {_n(c.waves, 'wave')} of up to {_n(c.wave_cap, 'host')} (budget "
                f"{c.budget_limit}, {c.out_of_service} out of service{grant}), "
                f"~{duration(c.est_hours)}"
            )
            if c.waiting_for_room:
                lines.append(f"    waits for room: {c.waiting_for_room}")
        for w in self.waves[:max_waves]:
            start = f"after {duration(w.est_start_hours)}" if w.est_start_hours else "at once"
            lines.append(
                f"  wave {w.number} of {w.cluster}: {_n(len(w.hosts), 'host')}, "
                f"{_n(len(w.jobs_affected), 'job')} ({len(w.jobs_interrupted)} interrupted), "
                f"starts {start}, ~{duration(w.est_hours)}"
            )
        if len(self.waves) > max_waves:
            lines.append(f"  ... {len(self.waves) - max_waves} more waves")
        lines += [f"conflict: {c}" for c in self.conflicts]
        lines += [f"warning: {w}" for w in self.warnings]
        if self.refused:
            lines.append(f"REFUSED: {self.refused}")
        return "\n".join(lines)


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"
