"""What maintenance costs the jobs: disjoint, non-negative parts, each measured directly.

One code for the simulator (``simulate --horizon``) and the live fleet's ledger
(``trainctl report``); both feed it what they see and read the same parts back:

- ``held_idle``: GPU-hours of hosts a maintenance owner holds installing or verifying while a
  queued job that fits could have used them: what a queued job lacks to start (``usable_hosts``);
- ``drain_wait``: the same for hosts the owner holds idle while the rest of their domain drains;
- ``lost_work``: at every stop a maintenance owner causes, the work the job had done since its
  last checkpoint, by all its GPUs;
- ``restart``: after every such stop, the restart the job then pays (``RestartModel``) by all its
  GPUs, charged at the stop;
- ``checkpoint_writes``: checkpoints a maintenance owner asked jobs to write. Nothing asks for
  one yet, so it is 0; the part is kept so a total read today means the same later.

Each part is a sum of non-negative terms, so the total is their sum and never negative. The old
measure, a no-maintenance run's goodput minus the policy's, is a difference of two schedules that
drift apart (jobs packed differently, failures landing on other jobs); the simulator reports it
beside the total, with the rest named ``residual``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.contracts.models import GPUS_PER_HOST

PARTS: tuple[str, ...] = ("held_idle", "drain_wait", "lost_work", "restart", "checkpoint_writes")
MAINTENANCE_CAUSE = "maintenance:"

#: Restart after a stop, the same for every job size: a machine swapped into the job (TrainMover,
#: ~20 s for a 1,024-GPU job) and the last checkpoint read back at Llama 3's storage rate
#: (4 GB a GPU at 2 TB/s over 16,384 GPUs: ~32 s). See docs/cost-model.md.
RESTART_HOURS = 1.0 / 60.0
#: One checkpoint write, the same for every job size: Llama 3's 4 GB a GPU over 16,384 GPUs at
#: 2 TB/s (~32 s), MindCluster's ~30 s flush of a 3B model.
CHECKPOINT_WRITE_HOURS = 30.0 / 3600.0


@dataclass(frozen=True)
class RestartModel:
    """The pinned restart and checkpoint model (see the module constants for the sources)."""

    restart_hours: float = RESTART_HOURS
    checkpoint_write_hours: float = CHECKPOINT_WRITE_HOURS
    restart_per_host_hours: float = 0.0
    """An experiment's restart growing with the job (``simulate --restart-per-host``); the
    pinned model has none."""

    def restart_of(self, hosts: int) -> float:
        """The restart a job of ``hosts`` hosts pays after a stop (hours); none without a base
        restart, as the simulated scheduler charges it."""
        if self.restart_hours <= 0:
            return 0.0
        return self.restart_hours + self.restart_per_host_hours * hosts

    def best_interval_hours(self, mtbf_hours: float) -> float:
        """Young's checkpoint interval sqrt(2 x write x MTBF) for a job whose mean time between
        failures is ``mtbf_hours``: what a job tuned as Llama 3's was would ask."""
        return math.sqrt(2.0 * self.checkpoint_write_hours * mtbf_hours)

    def writes_hours(self, progress_hours: float, interval_hours: float) -> float:
        """Of ``progress_hours`` of a run, the time spent writing checkpoints every
        ``interval_hours`` (only whole intervals write one)."""
        if interval_hours <= 0 or progress_hours <= 0:
            return 0.0
        return math.floor(progress_hours / interval_hours) * self.checkpoint_write_hours


def usable_hosts(held: int, free: int, queued_sizes: Iterable[int], room: float) -> float:
    """Of ``held`` hosts, how many queued jobs lack to start: in queue order, each job that does
    not fit in the ``free`` idle hosts left but would with the held ones takes the idle hosts
    left and what it lacks of the held. A job that fits in the idle hosts alone is not waiting
    for hosts (the scheduler holds it back for its own reasons: a reservation, its target), so
    it takes nothing. As the scheduler does, only the queue's head may start past the ``room``
    left below its target utilisation, and nothing starts without room."""
    if held <= 0 or room <= 0:
        return 0.0
    idle, left, used = free, held, 0
    for i, size in enumerate(queued_sizes):
        if left <= 0:
            break
        if size <= idle or size > idle + left or (i > 0 and size > room):
            continue
        used += size - idle
        left -= size - idle
        room -= size
        idle = 0
    return float(used)


#: Owner name prefix (its workflow id's) -> owner kind.
OWNER_KINDS = (("train-", "train"), ("ops-", "operation"), ("campaign-", "campaign"))


def owner_kind(owner: str) -> str:
    """``train``, ``operation`` or ``campaign`` from the owner's name (``other`` if none)."""
    return next((kind for prefix, kind in OWNER_KINDS if owner.startswith(prefix)), "other")


@dataclass
class CostLedger:
    """Parts by owner (GPU-hours), fed instant by instant or stop by stop."""

    model: RestartModel = field(default_factory=RestartModel)
    by_owner: defaultdict[str, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(PARTS, 0.0))
    )
    stops: int = 0

    def hold(self, owner: str, dt: float, working: int, waiting: int, usable: float | None) -> None:
        """``dt`` hours of ``working`` hosts installing or verifying and ``waiting`` hosts held
        idle in a draining domain; ``usable`` of them a queued job could have used (None: all;
        the live record does not carry the queue). Working hosts count first."""
        if dt <= 0:
            return
        held = working + waiting
        use = float(held) if usable is None else max(0.0, min(float(held), usable))
        on_work = min(float(working), use)
        parts = self.by_owner[owner]
        parts["held_idle"] += dt * on_work * GPUS_PER_HOST
        parts["drain_wait"] += dt * (use - on_work) * GPUS_PER_HOST

    def stop(self, detail: Mapping[str, Any]) -> str | None:
        """A ``job_interrupted`` entry: its lost work and restart, charged to the maintenance
        owner that caused it (None, and nothing charged, for a failure)."""
        cause = str(detail.get("cause", ""))
        if not cause.startswith(MAINTENANCE_CAUSE):
            return None
        owner = cause[len(MAINTENANCE_CAUSE) :]
        named = detail.get("hosts", 0)  # a count (simulated fleet) or the nodes (Slurm)
        hosts = len(named) if isinstance(named, list | tuple) else int(named)
        parts = self.by_owner[owner]
        parts["lost_work"] += max(0.0, float(detail.get("lost_gpu_hours", 0.0)))
        parts["restart"] += self.model.restart_of(hosts) * hosts * GPUS_PER_HOST
        self.stops += 1
        return owner

    def parts(self) -> dict[str, float]:
        """Every owner's parts added up."""
        total = dict.fromkeys(PARTS, 0.0)
        for parts in self.by_owner.values():
            for k, v in parts.items():
                total[k] += v
        return total

    def total(self) -> float:
        return sum(self.parts().values())


def rounded(parts: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in parts.items()}
