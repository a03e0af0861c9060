"""Temporal workflow definitions only: deterministic, sandboxed, importing models and activities."""

from workflows.cluster_train import ClusterTrain
from workflows.domain_maintenance import DomainMaintenance

WORKFLOWS: list[type] = [ClusterTrain, DomainMaintenance]

__all__ = ["WORKFLOWS", "ClusterTrain", "DomainMaintenance"]
