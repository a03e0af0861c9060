"""What one simulated campaign is asked to do: the train spec's fields that shape the schedule.

Apart from the engine so that what callers set (the CLI, the fleet-wide runner, the sweeps,
benchmarks) reads in one short place, and the engine's module is only how it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.contracts.models import CapacityBudget
from orchestrator.fleet.presets import Preset
from orchestrator.planning.cost import CHECKPOINT_WRITE_HOURS, RESTART_HOURS

#: The simulated campaign: a new kernel, BIOS and NIC firmware, so every host has work pending.
DEFAULT_TARGETS: dict[str, str] = {"os": "6.8.0-45", "bios": "3.2", "nic_firmware": "28.41.1000"}


@dataclass
class SimConfig:
    """One simulated campaign (the train spec's fields that shape the schedule)."""

    preset: Preset
    policy: str = "job-aware"
    budget: CapacityBudget = field(default_factory=CapacityBudget)
    domain_size: int | None = None
    """Hosts in flight at once; None means the budget's host limit."""
    days: float = 30.0
    seed: int = 1
    max_wait_hours: float = 4.0
    targets: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    series: bool = False
    cluster: str | None = None
    """Which cluster of the preset to simulate (default: the first; clusters are alike)."""
    halt_after_failures: int | None = None
    """Hosts failing in a row that halt the cycle (with ``halt_failure_rate``: a train spec's
    naive rule). None (the default): the bad-build rule (``halting.BadBuildRule``), as behind a
    train a campaign drives, so flaky hosts are quarantined and the cycle goes on."""
    halt_failure_rate: float = 0.2
    negotiate: bool = True
    """Ask each job before evicting it (``drain.negotiate``); False: evict as the policy says."""
    max_refusals: int = 2
    release_refusing: bool = True
    """A job-aware train hands a refusing job's hosts back and asks later
    (``DrainTracker.release``) instead of holding them toward the drain deadline."""
    steer_jobs: bool = True
    """A job-aware train's claim steers new jobs to visited hosts first
    (``PiggybackClaim.visited_first``); False measures what that buys."""
    cycle_target_hours: float | None = None
    """A train spec's ``cycle_target``: while the cycle is projected past it, the train evicts
    sooner (``train_plan.BEHIND_TARGET_EVICT_MIN_FILL``). None: no target."""
    horizon_hours: float | None = None
    """A fixed horizon (``--horizon``): the run lasts this long whatever happens, the train
    cycling (every cycle reported), the scheduler backfilling EASY and requeued jobs paying
    their restart; its figures are goodput's (``goodput``). None: the run stops at its cycle's
    end or after ``days``, as before."""
    target_every_hours: float | None = None
    """With a horizon: a new version of each targeted component this often (``<old>-r1``, ...)."""
    restart_base_hours: float = RESTART_HOURS
    restart_per_host_hours: float = 0.0
    """With a horizon: a requeued job restarts for base + per_host x hosts before progress
    (by default the pinned model's, the same for every job size: ``planning.cost``)."""
    checkpoint_write_hours: float = CHECKPOINT_WRITE_HOURS
    """With a horizon: what one checkpoint write takes from a job's progress."""
    pin_job: tuple[int, float] | None = None
    """With a horizon: (hosts, days) of a job at the queue's head from the start, lasting at
    least the horizon (the Llama 3 calibration's 2,048-host, 54-day job)."""
    cycle_every_hours: float | None = None
    """With a horizon, an experiment the live train has no field for: a cycle starts no sooner
    than this long after the previous one started (None: at once, as the live train does)."""
    pace: bool = True
    """With a cycle target: the train spares jobs while well ahead of it (``pacing``), as the
    live train does; False (``--no-pace``), an experiment the live train has no field for."""
