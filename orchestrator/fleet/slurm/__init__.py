"""The Slurm backend: trainctl's fleet-backend Protocols over a real Slurm cluster."""

from __future__ import annotations

from orchestrator.fleet.slurm.backend import SlurmCluster, SlurmFleet, SlurmRefused

__all__ = ["SlurmCluster", "SlurmFleet", "SlurmRefused"]
