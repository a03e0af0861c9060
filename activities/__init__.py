"""Temporal activities: the only code that touches a fleet backend (or Temporal as a client)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client

from activities.arbiter_activities import ArbiterActivities
from activities.campaign_activities import CampaignActivities
from activities.fleet_activities import FleetActivities
from activities.ops_activities import OpsActivities


def build_activities(
    fleet_path: Path | str, client: Client, task_queue: str
) -> list[Callable[..., object]]:
    """Every activity the worker registers, bound to the fleet and to this worker's client."""
    return [
        *FleetActivities(fleet_path).all(),
        *OpsActivities(fleet_path).all(),
        *ArbiterActivities(client, task_queue).all(),  # type: ignore[list-item]
        *CampaignActivities(fleet_path, client, task_queue).all(),
    ]


__all__ = [
    "ArbiterActivities",
    "CampaignActivities",
    "FleetActivities",
    "OpsActivities",
    "build_activities",
]
