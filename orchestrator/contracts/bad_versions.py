"""A version known to be bad, fleet-wide, as every backend's store keeps it and every reader sees
it (``FleetBackend.bad_versions``): marked by blame or by an operator, cleared by one. A cleared
version keeps its entry, with who cleared it and why."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class BadVersion(BaseModel):
    """One version marked bad (and, once cleared, who cleared it and why)."""

    component: str
    version: str
    reason: str
    marked_by: str
    marked_at: datetime
    cleared_by: str | None = None
    cleared_at: datetime | None = None
    cleared_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.cleared_at is None


class BadVersions(BaseModel):
    """The whole list, as one document."""

    entries: list[BadVersion] = Field(default_factory=list)


__all__ = ["BadVersion", "BadVersions"]
