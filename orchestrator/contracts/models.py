"""Domain model shared by every layer: hosts, components, updates, jobs and capacity budgets.

These are plain pydantic models with no I/O so that workflows (inside the Temporal sandbox),
activities, the planner and the discrete-event simulator can all use them. Validation errors name
the offending field, which the CLI turns into exit code 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from enum import StrEnum
from fractions import Fraction
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

GPUS_PER_HOST = 8


def _no_boolean(v: object) -> object:
    """YAML's ``true`` is not a count: refuse it rather than read it as 1."""
    if isinstance(v, bool):
        raise ValueError(f"must be a whole number, not a boolean ({v!r})")
    return v


#: A whole number in a spec (a host count, a failure limit): booleans are refused.
Count = Annotated[int, BeforeValidator(_no_boolean)]


class Component(StrEnum):
    """A versioned piece of a host's (or switch's) stack."""

    OS = "os"
    BIOS = "bios"
    BMC = "bmc"
    GPU_FIRMWARE = "gpu_firmware"
    NIC_FIRMWARE = "nic_firmware"
    GPU_DRIVER = "gpu_driver"
    CUDA = "cuda"
    SWITCH_FIRMWARE = "switch_firmware"


HOST_COMPONENTS: tuple[Component, ...] = (
    Component.OS,
    Component.BIOS,
    Component.BMC,
    Component.GPU_FIRMWARE,
    Component.NIC_FIRMWARE,
    Component.GPU_DRIVER,
    Component.CUDA,
)
#: Lower layers roll gradually through the maintenance train, host by host.
LOWER_LAYER: frozenset[str] = frozenset(
    {"os", "bios", "bmc", "gpu_firmware", "nic_firmware", "switch_firmware"}
)
#: The upper layer must be identical across a consistency group; only bulk operations change it.
UPPER_LAYER: frozenset[str] = frozenset({"gpu_driver", "cuda"})

#: Letters and digits first, then also ``. _ + -`` and ``:`` (a Debian epoch: ``1:2.3-4``).
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+:\-]{0,63}$")


def check_version(field: str, value: object) -> str:
    """Return ``value`` as a version string, or raise ValueError naming ``field``.

    Versions are text, kept exactly as written (``6.10`` is not ``6.1``): the spec loader
    (``orchestrator.contracts.specs``) reads numbers as their text. An int is accepted from Python
    callers
    (it has a single spelling); a float, a boolean (YAML reads ``yes``/``on``/``true`` as one) or
    anything else is refused with a request to quote the version.
    """
    if value is None:
        raise ValueError(f"{field}: version must not be empty")
    if isinstance(value, bool) or not isinstance(value, str | int):
        kind = (
            "a boolean"
            if isinstance(value, bool)
            else "a number"
            if isinstance(value, float)
            else type(value).__name__
        )
        # Show a short excerpt only: a YAML alias bomb expands to gigabytes under repr().
        shown = repr(value) if isinstance(value, bool | int | float) else f"a {kind}"
        raise ValueError(
            f'{field}: version must be text, got {kind} ({shown}); quote it, e.g. {field}: "6.10"'
        )
    text = str(value).strip()
    if not text:
        raise ValueError(f"{field}: version must not be empty")
    if not _VERSION_RE.match(text):
        raise ValueError(
            f"{field}: malformed version {text!r} (letters, digits, '.', '-', '_', '+', ':')"
        )
    return text


def check_targets(
    targets: Mapping[str, object], allow_upper: bool, allow_lower: bool = True
) -> dict[str, str]:
    """Validate a component → version mapping; errors name the component."""
    out: dict[str, str] = {}
    known = {c.value for c in Component}
    for comp, ver in targets.items():
        if comp not in known:
            raise ValueError(f"{comp}: unknown component (known: {', '.join(sorted(known))})")
        if comp in UPPER_LAYER and not allow_upper:
            raise ValueError(
                f"{comp}: gpu_driver/cuda must stay identical across a job, so they change only "
                "through a bulk operation (trainctl ops), not a maintenance train"
            )
        if comp in LOWER_LAYER and not allow_lower:
            raise ValueError(f"{comp}: this operation kind changes only gpu_driver/cuda")
        out[comp] = check_version(comp, ver)
    return out


class HostState(StrEnum):
    """Lifecycle of a host. Everything but IN_SERVICE is out of service for budgets."""

    IN_SERVICE = "in_service"
    CORDONED = "cordoned"
    DRAINING = "draining"
    IN_MAINTENANCE = "in_maintenance"
    VERIFYING = "verifying"
    QUARANTINED = "quarantined"
    IN_REPAIR = "in_repair"


class Update(BaseModel):
    """One component update: what it does to a host and how long it takes in fleet time."""

    component: Component
    target: str
    duration_hours: float = Field(ge=0)
    needs_reboot: bool = True
    depends_on: list[Component] = Field(default_factory=list)

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, v: object) -> str:
        return check_version("target", v)


def _host_limit(v: object, field: str) -> int | str:
    """A host count (>= 1) or a percentage string like ``"3%"``, normalised; errors name
    ``field``."""
    if isinstance(v, bool):
        raise ValueError(f"{field} must be a host count or a percentage like '3%'")
    if isinstance(v, int | float):
        if v != int(v) or v < 1:
            raise ValueError(f"{field} must be at least one host")
        return int(v)
    text = str(v).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise ValueError(f"{field}: {text!r} is not a percentage") from None
        if not 0 < pct <= 100:
            raise ValueError(f"{field} must be above 0% and at most 100%")
        return f"{pct:g}%"
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{field}: {text!r} is neither a host count nor a percentage") from None
    if count < 1:
        raise ValueError(f"{field} must be at least one host")
    return count


def _amount(value: int | str) -> float:
    """A limit's size in its own unit (hosts, or percent)."""
    return float(value[:-1]) if isinstance(value, str) else float(value)


def _over_floor(maintenance: int | str, floor: int | str) -> str:
    return (
        f"maintenance: {maintenance} is more than max_unavailable ({floor}): planned work "
        "cannot hold more hosts than may be out for any reason; lower maintenance or raise "
        "max_unavailable"
    )


def _hosts_of(value: int | str, hosts_total: int) -> int:
    """A count capped at the cluster size, or a percentage floored exactly."""
    if isinstance(value, int):
        return max(0, min(value, hosts_total))
    return max(0, math.floor(hosts_total * Fraction(value[:-1]) / 100))


class CapacityBudget(BaseModel):
    """Two limits on hosts out of service in a cluster, and per failure domain.

    ``max_unavailable`` is the availability floor: the most hosts out of service for any reason
    (maintenance, failures, repair, quarantine). ``maintenance`` is the most hosts out for planned
    work by every train, operation and campaign of the cluster together; the gap between the two
    is the failure buffer, so failures landing on the fleet do not eat the maintenance budget
    (Meta's OpsPlanner keeps the two buffers apart). Left out, ``maintenance`` is
    ``max_unavailable`` (what a budget meant before the split). Both are a host count or a
    percentage string such as ``"3%"``; ``per_rack``/``per_zone`` cap hosts out of service within
    one rack or zone. A new cordon needs room under both limits; work in flight finishes.
    """

    model_config = ConfigDict(extra="forbid")

    #: The availability floor: most hosts out of service for any reason (count or percentage).
    max_unavailable: int | str = "3%"
    #: Most hosts out for planned work of every owner together (left out: max_unavailable).
    maintenance: int | str | None = None
    #: Most hosts out of service within one rack.
    per_rack: Count | None = Field(default=None, ge=1)
    #: Most hosts out of service within one zone.
    per_zone: Count | None = Field(default=None, ge=1)

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _max_unavailable(cls, v: object) -> int | str:
        return _host_limit(v, "max_unavailable")

    @field_validator("maintenance", mode="before")
    @classmethod
    def _maintenance(cls, v: object) -> int | str | None:
        return None if v is None else _host_limit(v, "maintenance")

    def limit(self, hosts_total: int) -> int:
        """The floor: hosts this budget allows out of service, for any reason, in a cluster of
        ``hosts_total``.

        A count is capped at the cluster size; a percentage is floored exactly (``3%`` of 128
        is 3, ``0.5%`` of 128 is 0). The result may be 0: whoever needs at least one host says
        so, with :meth:`require_hosts` (refuse) or an explicit ``max(1, ...)``.
        """
        return _hosts_of(self.max_unavailable, hosts_total)

    def maintenance_limit(self, hosts_total: int) -> int:
        """Hosts all planned work together may hold out of service: ``maintenance``, never more
        than the floor; ``max_unavailable`` when the spec names no maintenance budget."""
        floor = self.limit(hosts_total)
        if self.maintenance is None:
            return floor
        return min(floor, _hosts_of(self.maintenance, hosts_total))

    def check_maintenance(self, hosts_total: int, field: str = "budget.max_unavailable") -> None:
        """ValueError (naming ``budget.maintenance``, beside ``field``) when the maintenance
        budget allows more hosts than the floor in a cluster of ``hosts_total``."""
        limit = self.limit(hosts_total)
        if self.maintenance is not None and _hosts_of(self.maintenance, hosts_total) > limit:
            prefix, _, _ = field.rpartition(".")
            raise ValueError(
                (f"{prefix}." if prefix else "")
                + _over_floor(self.maintenance, self.max_unavailable)
                + f" ({_hosts_of(self.maintenance, hosts_total)} hosts against {limit} of "
                f"{hosts_total})"
            )

    def require_hosts(self, hosts_total: int, field: str = "budget.max_unavailable") -> int:
        """:meth:`limit`, or ValueError naming ``field`` when it allows no host at all.

        The one check of a budget against a cluster size (train spec, ``train reconfigure``,
        simulator), so each refuses the same budgets with the same message. A maintenance budget
        that allows no host is refused the same way (naming ``budget.maintenance``).
        """
        limit = self.limit(hosts_total)
        self.check_maintenance(hosts_total, field)
        if limit >= 1 and (self.maintenance is None or self.maintenance_limit(hosts_total) >= 1):
            return limit
        if hosts_total < 1:
            raise ValueError(f"{field}: the cluster has no hosts")
        least = math.ceil(Fraction(10_000, hosts_total)) / 100
        value: int | str | None = self.max_unavailable
        if limit >= 1:  # the floor allows hosts, the maintenance budget none
            prefix, _, _ = field.rpartition(".")
            field, value = (f"{prefix}." if prefix else "") + "maintenance", self.maintenance
        raise ValueError(
            f"{field}: {value} of {hosts_total} hosts is below one host; "
            f'allow at least one (e.g. "{least:g}%" or 1)'
        )

    @model_validator(mode="after")
    def _sane(self) -> CapacityBudget:
        """One budget rule everywhere (spec, flags, simulator): planned work may not hold more
        than the floor. Two limits of one kind compare here; a count against a percentage is
        compared at the cluster's size, by :meth:`require_hosts`."""
        m, floor = self.maintenance, self.max_unavailable
        if m is not None and type(m) is type(floor) and _amount(m) > _amount(floor):
            raise ValueError(_over_floor(m, floor))
        return self


#: Hours, accepted as a number or as text like ``30m``, ``4h``, ``2d``.
DurationHours = Annotated[
    float,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[smhdw]?\s*$"},
            ],
            "description": "hours, or a duration such as '30m', '4h', '2d'",
        }
    ),
]


# One model for trains (TrainSpec.drain) and bulk operations (OperationSpec.drain): users write
# `drain: {max_wait: 4h}`, code reads `max_wait_hours`.
class DrainPolicy(BaseModel):
    """How long to wait for running jobs before evicting them, right after a checkpoint."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_wait_hours: DurationHours = Field(default=4.0, alias="max_wait")
    #: Ask each job before evicting it (go / wait for my checkpoint or end / not now).
    negotiate: bool = True
    #: "Not now" answers one visit honours per job; then the deadline rules.
    max_refusals: Count = Field(default=2, ge=0, le=100)

    @field_validator("max_wait_hours", mode="before")
    @classmethod
    def _max_wait(cls, v: object) -> float:
        return parse_duration_hours(v, "drain.max_wait")


def parse_duration_hours(value: object, field: str) -> float:
    """Parse ``4h``, ``30m``, ``2d``, ``90s`` or a number of hours; refuse negatives."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: not a duration")
    if isinstance(value, int | float):
        hours = float(value)
    else:
        m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(value))
        if not m:
            raise ValueError(f"{field}: {value!r} is not a duration like 30m, 4h or 2d")
        scale = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "": 1.0, "d": 24.0, "w": 168.0}[m.group(2)]
        hours = float(m.group(1)) * scale
    if hours < 0:
        raise ValueError(f"{field}: duration must not be negative")
    return hours


#: Lower-layer components whose versions in service at once the skew window bounds.
SKEWED_COMPONENTS: tuple[str, ...] = ("os", "bios", "bmc", "gpu_firmware", "nic_firmware")
