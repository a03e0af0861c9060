"""What-if simulator: the train's planning code over the fleet model, in virtual fleet time."""

from orchestrator.simulator.config import DEFAULT_TARGETS, SimConfig
from orchestrator.simulator.engine import build_cluster, simulate
from orchestrator.simulator.policies import POLICY_SPECS, PolicySpec, get_policy
from orchestrator.simulator.result import (
    SimResult,
    lower_bound_after_outages_hours,
    lower_bound_hours,
)

__all__ = [
    "DEFAULT_TARGETS",
    "POLICY_SPECS",
    "PolicySpec",
    "SimConfig",
    "SimResult",
    "build_cluster",
    "get_policy",
    "lower_bound_after_outages_hours",
    "lower_bound_hours",
    "simulate",
]
