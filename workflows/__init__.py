"""Temporal workflow definitions only: deterministic, sandboxed, importing models and activities."""

from workflows.capacity_arbiter import CapacityArbiter
from workflows.cluster_train import ClusterTrain
from workflows.domain_maintenance import DomainMaintenance

WORKFLOWS: list[type] = [ClusterTrain, DomainMaintenance, CapacityArbiter]

__all__ = ["WORKFLOWS", "CapacityArbiter", "ClusterTrain", "DomainMaintenance"]
