"""Temporal activities: the only code that touches a fleet backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from activities.fleet_activities import FleetActivities


def build_activities(fleet_path: Path) -> list[Callable[..., object]]:
    """Every activity the worker registers, bound to the fleet at ``fleet_path``."""
    return FleetActivities(fleet_path).all()


__all__ = ["FleetActivities", "build_activities"]
