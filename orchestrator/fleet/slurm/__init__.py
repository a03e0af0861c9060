"""The Slurm backend: trainctl's fleet-backend Protocols over a real Slurm cluster."""

from __future__ import annotations

from orchestrator.contracts.errors import SlurmRefused
from orchestrator.fleet.slurm.backend import SlurmCluster
from orchestrator.fleet.slurm.fleet import SlurmFleet

__all__ = ["SlurmCluster", "SlurmFleet", "SlurmRefused"]
