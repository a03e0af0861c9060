"""Temporal workflow definitions only: deterministic, sandboxed, importing models and activities.

The package imports nothing itself: the sandbox runs this file again for every workflow run it
makes (each domain a child run), and importing every workflow here made each such run load all
six modules. ``WORKFLOWS`` and the classes are made on first access instead (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

#: class name -> module of the workflows a worker registers, in registration order
_MODULES = {
    "ClusterTrain": "workflows.cluster_train",
    "DomainMaintenance": "workflows.domain_maintenance",
    "CapacityArbiter": "workflows.capacity_arbiter",
    "BulkOperation": "workflows.bulk_operation",
    "ClusterOperation": "workflows.cluster_operation",
    "Campaign": "workflows.campaign",
}


def __getattr__(name: str) -> Any:
    if name == "WORKFLOWS":
        return [getattr(importlib.import_module(m), n) for n, m in _MODULES.items()]
    if name in _MODULES:
        return getattr(importlib.import_module(_MODULES[name]), name)
    raise AttributeError(f"module 'workflows' has no attribute {name!r}")


__all__ = [
    "WORKFLOWS",
    "BulkOperation",
    "Campaign",
    "CapacityArbiter",
    "ClusterOperation",
    "ClusterTrain",
    "DomainMaintenance",
]
