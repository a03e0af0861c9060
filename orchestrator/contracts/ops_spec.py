"""The bulk-operation spec (OpsPlanner): what to change, on which hosts, and how carefully.

A spec arrives from people (YAML) and from automation (JSON), so it is strict: unknown fields are
refused, and every error names its field (``targets: cuda: version must not be empty``), which
the CLI turns into exit code 2. The kind decides which components may be targeted: the upper
layer (``gpu_driver``, ``cuda``) must stay identical across a job, so only ``cuda-upgrade`` touches
it, and ``lower-layer`` touches only host lower layers. Any well-formed version string is a
valid target; the planner compares it with what hosts run, nothing more.

Files are read by the shared spec loader (``orchestrator.contracts.specs``), which keeps numbers as
written
(``cuda: 12.10`` stays ``"12.10"``, in YAML and JSON alike) and reports one-line errors naming the
field.
"""

from __future__ import annotations

import hashlib
import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from orchestrator.contracts.approvals import ApprovalSpec
from orchestrator.contracts.batch_policy import BatchPolicy
from orchestrator.contracts.hostlist import expand_hostlist
from orchestrator.contracts.models import (
    UPPER_LAYER,
    CapacityBudget,
    Count,
    DrainPolicy,
    DurationHours,
    check_targets,
    parse_duration_hours,
)
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.specs import MAX_SPEC_BYTES, parse_spec
from orchestrator.contracts.specs import load_spec as _load_spec
from orchestrator.contracts.version_checks import (
    check_skew,
    check_supersedes,
    check_supersedes_targets,
)

Kind = Literal["cuda-upgrade", "lower-layer", "reboot", "drain-for-repair"]
KINDS: tuple[str, ...] = get_args(Kind)
Consistency = Literal["job", "cluster"]

_GLOB = r"^[A-Za-z0-9_.*?!\[\]-]+$"
_REQUEST_ID = r"^[A-Za-z0-9._-]{1,128}$"

Glob = Annotated[str, Field(pattern=_GLOB, min_length=1)]
Feature = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.+-]+$", min_length=1)]
#: The Slurm-only scope fields: the simulated fleet has no partitions or node features.
SLURM_SCOPE_FIELDS = ("partitions", "nodes", "features")


#: The most entries ``scope.zones``, ``scope.racks`` or ``scope.hosts`` may each list.
MAX_SCOPE_PATTERNS = 100_000

_LIMITS = (
    f"At most {MAX_SCOPE_PATTERNS:,} entries; the whole spec document is at most "
    f"{MAX_SPEC_BYTES // 2**20} MiB."
)


def _patterns(what: str, whose: str) -> Any:
    return Field(
        default=None,
        min_length=1,
        max_length=MAX_SCOPE_PATTERNS,
        description=f"{what} names or fnmatch globs; {whose} must match one of them. {_LIMITS}",
    )


class Scope(BaseModel):
    """Which hosts the operation covers: a cluster name or glob, optionally narrowed.

    Zone, rack and host entries are names or globs, matched against the full name
    (``c00-z01-r003``) or the part after the cluster (``z01-r003``); the lists intersect, and an
    entry that matches nothing is an error. Each list holds at most ``MAX_SCOPE_PATTERNS``
    (100,000) entries, and a spec document is at most 4 MiB (``orchestrator.contracts.specs``); past
    either the spec is refused naming the field (exit 2).

    On a Slurm fleet a scope may also name ``partitions`` (names or globs; a node in any of
    them), ``nodes`` (a hostlist expression) and ``features`` (a node must carry all of them),
    intersecting with the rest; the simulated fleet has no partitions or node features and
    refuses all three naming the field.
    """

    model_config = ConfigDict(extra="forbid")

    cluster: Glob = Field(description="cluster name or fnmatch glob, e.g. 'c0*'")
    zones: list[Glob] | None = _patterns("Zone", "a host's zone")
    racks: list[Glob] | None = _patterns("Rack", "a host's rack")
    hosts: list[Glob] | None = _patterns("Host", "a host's name")
    partitions: list[Glob] | None = _patterns(
        "Slurm partition", "one of a node's partitions (Slurm fleets only)"
    )
    nodes: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "a Slurm hostlist expression, e.g. 'h[01-04],h07': the nodes it names (Slurm fleets "
            f"only; at most {MAX_SCOPE_PATTERNS:,} names, each must be a node of the scope)"
        ),
    )
    features: list[Feature] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCOPE_PATTERNS,
        description=(
            "Slurm node features, e.g. [a100]: a node must carry all of them (Slurm fleets only)"
        ),
    )

    @field_validator("nodes")
    @classmethod
    def _hostlist(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                names = expand_hostlist(v, limit=MAX_SCOPE_PATTERNS, strict=True)
            except ValueError as err:
                raise ValueError(f"scope.nodes: {err}") from None
            if not names:
                raise ValueError("scope.nodes: the hostlist names no node")
        return v

    def node_names(self) -> list[str] | None:
        """The names ``nodes`` expands to (None when the scope lists none)."""
        if self.nodes is None:
            return None
        return expand_hostlist(self.nodes, limit=MAX_SCOPE_PATTERNS, strict=True)

    @field_validator("zones", "racks", "hosts", "partitions", mode="before")
    @classmethod
    def _at_most(cls, v: object, info: ValidationInfo) -> object:
        if isinstance(v, list | tuple) and len(v) > MAX_SCOPE_PATTERNS:
            raise ValueError(
                f"scope.{info.field_name}: {len(v):,} entries, over the limit of "
                f"{MAX_SCOPE_PATTERNS:,} (split the operation or use globs)"
            )
        return v


#: The drain settings of an operation: the same model as a train's (``drain: {max_wait: 4h}``).
DrainSpec = DrainPolicy


class Window(BaseModel):
    """An explicitly granted maintenance window: a larger budget for a bounded time.

    ``max_unavailable`` replaces the budget's during the operation (per-rack and per-zone limits
    do not apply to a ``consistency: cluster`` cut-over, which necessarily takes whole racks).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Hosts the window allows out of service (count or percentage), replacing the budget's.
    max_unavailable: int | str
    #: When the window opens (ISO 8601 with a zone; none: at once).
    start: AwareDatetime | None = None
    duration_hours: DurationHours = Field(alias="duration")

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _max_unavailable(cls, v: object) -> int | str:
        try:
            return CapacityBudget(max_unavailable=v).max_unavailable  # type: ignore[arg-type]
        except ValidationError as err:
            raise ValueError(str(err.errors()[0]["msg"]).removeprefix("Value error, ")) from None

    @field_validator("duration_hours", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        hours = parse_duration_hours(v, "window.duration")
        if hours <= 0:
            raise ValueError("window.duration: must be above 0")
        return hours

    def limit(self, hosts_total: int) -> int:
        """Hosts this window allows out of service in a cluster of ``hosts_total``."""
        return CapacityBudget(max_unavailable=self.max_unavailable).limit(hosts_total)


class OperationSpec(BaseModel):
    """One bulk operation; fields may grow, these keep their meaning. A spec document (YAML or
    JSON) is at most 4 MiB, and each scope list at most 100,000 entries."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, title="OperationSpec")

    kind: Kind = "cuda-upgrade"
    scope: Scope
    targets: dict[str, str] = Field(
        default_factory=dict, validate_default=True, description="component -> target version"
    )
    consistency: Consistency = "job"
    max_failures: Count | None = Field(
        default=None,
        ge=0,
        description=(
            "failures (counted over a cluster) the operation tolerates before it rolls its wave "
            "back and stops; left out, the bad-build rule decides: it stops only when failures "
            "among the changed hosts exceed the fleet's base failure rate significantly "
            "(orchestrator.planning.failure_gate), so a host failing alone is quarantined"
        ),
    )
    request_id: str | None = Field(
        default=None, pattern=_REQUEST_ID, description="idempotency key: [A-Za-z0-9._-]"
    )
    drain: DrainSpec = Field(default_factory=DrainSpec)
    budget: CapacityBudget = Field(default_factory=CapacityBudget)
    window: Window | None = None
    #: Maintenance windows and blackouts (fleet time): no wave starts outside them. Not the
    #: ``window`` above, a larger budget for a bounded time
    # (``orchestrator.contracts.schedule_window``).
    schedule: Schedule | None = None
    #: No wave starts within this long (``30m``) of the latest wave's return to service
    #: (``orchestrator.execution.soak``); None: the next wave starts at once.
    soak_hours: DurationHours | None = Field(
        default=None,
        alias="soak",
        description="no wave starts within this long (e.g. 30m) of the latest wave's return",
    )
    #: Waves that grow while they succeed (``orchestrator.contracts.batch_policy``); None:
    #: every wave as large as the budget allows.
    batch: BatchPolicy | None = None
    #: Hosts a failed wave rolls back at a time, each batch reinstalled, verified and returned
    #: before the next; None: the whole wave at once.
    rollback_batch: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="hosts a failed wave rolls back at a time (default: the whole wave at once)",
    )
    #: How long a wave waits for room when outages (failures, repair) fill the budget, in fleet
    #: time; then the operation fails naming the budget, so a nightly run never eats the next.
    max_wait_for_room_hours: DurationHours = Field(
        default=12.0,
        alias="max_wait_for_room",
        description=(
            "how long (fleet time, e.g. 12h) a wave waits for room when hosts out for failures "
            "or repair fill the budget; then the operation fails, naming the budget (0: no "
            "waiting, such a plan is refused)"
        ),
    )
    #: The version skew window (``orchestrator.planning.version_policy``), kind lower-layer only.
    skew: dict[str, int] = Field(
        default_factory=dict,
        description=(
            "lower-layer component -> versions that may serve at once in one cluster (default 3: "
            "old, rolling, new); a target that would put more in service is refused up front"
        ),
    )
    supersedes: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "lower-layer component -> the older rollout's version this one replaces: it leaves "
            "the skew window's count (hosts still waiting for it get this target instead)"
        ),
    )
    #: An approval gate before the operation starts (``after`` is a campaign stage's only).
    approval: ApprovalSpec | None = None

    @field_validator("approval")
    @classmethod
    def _approval_before_only(cls, v: ApprovalSpec | None) -> ApprovalSpec | None:
        if v is not None and (v.after or not v.before):
            raise ValueError("approval: an operation has one gate, before it starts (before: true)")
        return v

    @field_validator("max_wait_for_room_hours", mode="before")
    @classmethod
    def _max_wait_for_room(cls, v: object) -> float:
        return parse_duration_hours(v, "max_wait_for_room")

    @field_validator("skew", mode="before")
    @classmethod
    def _skew(cls, v: object, info: ValidationInfo) -> dict[str, int]:
        out = check_skew(v)
        _lower_layer_only(out, "skew", info)
        return out

    @field_validator("supersedes", mode="before")
    @classmethod
    def _supersedes(cls, v: object, info: ValidationInfo) -> dict[str, str]:
        out = check_supersedes(v)
        _lower_layer_only(out, "supersedes", info)
        if "targets" in info.data:  # else the targets' own error is the one to show
            check_supersedes_targets(out, info.data["targets"])
        return out

    @field_validator("soak_hours", mode="before")
    @classmethod
    def _soak(cls, v: object) -> float | None:
        return None if v is None else parse_duration_hours(v, "soak")

    @field_validator("schedule")
    @classmethod
    def _no_hard_stop(cls, v: Schedule | None) -> Schedule | None:
        if v is not None and v.hard_stop:
            raise ValueError(
                "schedule.hard_stop: an operation's wave cuts a consistency group over "
                "together and always finishes; only trains hand hosts back at a window's end"
            )
        return v

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, v: object, info: ValidationInfo) -> dict[str, str]:
        if v is None:
            v = {}
        if not isinstance(v, dict):
            raise ValueError("targets must map components to versions")
        # YAML reads `cuda:` as null; call that what it is, an empty version.
        raw: dict[str, object] = {str(k): ("" if x is None else x) for k, x in v.items()}
        kind = info.data.get("kind")
        if kind in ("reboot", "drain-for-repair"):
            if raw:
                raise ValueError(f"kind {kind} changes no versions; leave targets out")
            return {}
        if kind == "lower-layer":
            for comp in raw:
                if comp in UPPER_LAYER:
                    raise ValueError(
                        f"{comp}: kind lower-layer changes only lower layers; "
                        "use kind: cuda-upgrade for gpu_driver/cuda"
                    )
                if comp == "switch_firmware":
                    raise ValueError(f"{comp}: switches are not hosts; ops change host components")
            out = check_targets(raw, allow_upper=False)
        else:
            out = check_targets(raw, allow_upper=True, allow_lower=kind != "cuda-upgrade")
        if not out and kind in ("cuda-upgrade", "lower-layer"):
            need = "gpu_driver and/or cuda" if kind == "cuda-upgrade" else "lower-layer components"
            raise ValueError(f"kind {kind} needs at least one target ({need})")
        return out

    @property
    def operation_id(self) -> str:
        return operation_id(self)


def _lower_layer_only(value: dict[str, Any], field: str, info: ValidationInfo) -> None:
    kind = info.data.get("kind")
    if value and kind is not None and kind != "lower-layer":
        raise ValueError(f"{field}: kind {kind} changes no lower layer; only lower-layer has one")


def operation_id(spec: OperationSpec) -> str:
    """``ops-<request_id>``, or ``ops-<hash>`` of the canonical spec: stable, without '/'."""
    if spec.request_id:
        return f"ops-{spec.request_id}"
    dump = spec.model_dump(mode="json", exclude={"request_id"})
    if dump.get("schedule") is None:  # specs from before schedules keep their ids
        dump.pop("schedule", None)
    elif dump["schedule"].get("time_zone") == "UTC":  # and those from before time zones
        dump["schedule"].pop("time_zone")
    for name in ("soak_hours", "batch", "approval", "rollback_batch"):  # and those from before
        # soaks, growing batches, approval gates and rollback batches
        if dump.get(name) is None:
            dump.pop(name, None)
    for name in ("skew", "supersedes"):  # and those from before the skew window
        if not dump.get(name):
            dump.pop(name, None)
    for name in SLURM_SCOPE_FIELDS:  # and those from before the Slurm scope fields
        if dump["scope"].get(name) is None:
            dump["scope"].pop(name, None)
    canon = json.dumps(dump, sort_keys=True, separators=(",", ":"))
    return "ops-" + hashlib.sha256(canon.encode()).hexdigest()[:12]


def resolve_clusters(scope: Scope, names: list[str]) -> list[str]:
    """The clusters ``scope.cluster`` names or matches; ValueError naming ``scope.cluster``."""
    found = [n for n in names if fnmatchcase(n, scope.cluster)]
    if not found:
        known = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise ValueError(f"scope.cluster: {scope.cluster!r} matches no cluster (known: {known})")
    return found


def spec_json_schema() -> dict[str, Any]:
    """The published JSON Schema of OperationSpec (draft 2020-12)."""
    schema = OperationSpec.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def parse_spec_text(text: str, source: str = "the input") -> OperationSpec:
    """Parse YAML or JSON (told apart by content) into a spec; SpecError naming the field."""
    return parse_spec(text, OperationSpec, what="operation spec", source=source)


def load_spec(path: Path | str) -> OperationSpec:
    """Read a ``.yaml``/``.yml``/``.json`` spec; SpecError (a ValueError) naming the field."""
    return _load_spec(path, OperationSpec, what="operation spec")
