"""Temporal workflow definitions only: deterministic, sandboxed, importing models and activities."""

from workflows.bulk_operation import BulkOperation
from workflows.campaign import Campaign
from workflows.capacity_arbiter import CapacityArbiter
from workflows.cluster_operation import ClusterOperation
from workflows.cluster_train import ClusterTrain
from workflows.domain_maintenance import DomainMaintenance

WORKFLOWS: list[type] = [
    ClusterTrain,
    DomainMaintenance,
    CapacityArbiter,
    BulkOperation,
    ClusterOperation,
    Campaign,
]

__all__ = [
    "WORKFLOWS",
    "BulkOperation",
    "Campaign",
    "CapacityArbiter",
    "ClusterOperation",
    "ClusterTrain",
    "DomainMaintenance",
]
