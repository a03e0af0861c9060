"""Pacing a train to its cycle target (``simulate --cycle-target``), as the live train paces.

Every train, live or simulated, rests between cycles (``planning.resting``): a completed cycle
is followed by the next only once a host needs a drained visit (new versions, a host back from
repair off its targets), and hosts with nothing pending are checked in place, never drained.
So no run spends a cycle of reboots and verifications on hosts that install nothing.

What pacing adds is how a train ahead of its target spares jobs within a cycle (``AHEAD``,
through ``take_domain``'s ``AheadRule``; ``execution.cycle.project_cycle_end`` the projection):
while its cycle is projected to end within half the target it evicts no job, taking idle hosts
and those jobs free as they end or fail (a 2,048-host job fails every ~3 h); within 0.8 of the
target it evicts no job of more than 4 domains' hosts (368 on meta-24k: the 512- to
2,048-host jobs, whose every stop costs a restart on all their GPUs, for the 92 due hosts a
domain takes of them); past that it evicts as before, and sooner once projected past the target.

The rule (``execution.take.AHEAD_OF_TARGET``) is the live train's too (its ``plan_domain``
activity passes it), so every run with a cycle target paces, except the experiments the live
train has no field for (``--cycle-every``, ``--no-pace``).
"""

from __future__ import annotations

from orchestrator.execution.take import AHEAD_OF_TARGET
from orchestrator.simulator.config import SimConfig


def pacing_on(cfg: SimConfig) -> bool:
    """Whether this run's train spares jobs while ahead of its cycle target (``AHEAD``)."""
    return (
        cfg.pace
        and cfg.cycle_target_hours is not None
        and cfg.cycle_every_hours is None
        and cfg.policy != "none"
    )


#: How a paced train ahead of its target spares jobs (see the module docstring).
AHEAD = AHEAD_OF_TARGET
