"""The Slurm backend: trainctl's fleet-backend Protocols over a real Slurm cluster."""

from __future__ import annotations

from orchestrator.fleet.slurm.backend import SlurmCluster, SlurmRefused
from orchestrator.fleet.slurm.fleet import SlurmFleet

__all__ = ["SlurmCluster", "SlurmFleet", "SlurmRefused"]
