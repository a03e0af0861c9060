"""Temporal activities: the only code that touches a fleet backend (or Temporal as a client)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Interceptor

from activities.arbiter_activities import ArbiterActivities
from activities.campaign_activities import CampaignActivities
from activities.clock_turns import ClockTurns
from activities.fleet_activities import FleetActivities
from activities.ops_activities import OpsActivities


def build_activities(
    fleet_path: Path | str, client: Client, task_queue: str
) -> list[Callable[..., object]]:
    """Every activity the worker registers, bound to the fleet and to this worker's client."""
    return build_worker_parts(fleet_path, client, task_queue)[0]


def build_worker_parts(
    fleet_path: Path | str, client: Client, task_queue: str
) -> tuple[list[Callable[..., object]], list[Interceptor]]:
    """Every activity the worker registers, and its interceptors (``ClockTurns``)."""
    fleet = FleetActivities(fleet_path)
    activities: list[Callable[..., object]] = [
        *fleet.all(),
        *OpsActivities(fleet_path).all(),
        *ArbiterActivities(client, task_queue).all(),  # type: ignore[list-item]
        *CampaignActivities(fleet_path, client, task_queue).all(),
    ]
    return activities, [ClockTurns(fleet, client)]


__all__ = [
    "ArbiterActivities",
    "CampaignActivities",
    "FleetActivities",
    "OpsActivities",
    "build_activities",
    "build_worker_parts",
]
