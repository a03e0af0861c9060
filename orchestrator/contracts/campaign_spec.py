"""The campaign spec: one change rolled over a scope of clusters in ordered stages, with gates.

```yaml
name: kernel-6-12
targets: {os: "6.12.0-9"}
scope: {cluster: "*"}
stages:                       # each passes its gates and bakes before the next starts
  - {name: canary, clusters: [c00], hosts: 4, bake: 2h}
  - {name: first-cluster, clusters: [c00], bake: 4h}
  - {name: rest, clusters: "*", parallel: 2}
gates: {max_failures: "5%", prometheus: {url: "http://...", query: "ALERTS{alertstate='firing'}"}}
```

Read by the one spec loader (``orchestrator.contracts.specs``: versions stay text as written);
strict, so
a typo is refused naming the dotted field (exit 2). ``gates`` may also be set per stage, field by
field over the campaign's. ``train`` says how a train the campaign starts (where none runs) is
sized; a running train keeps its own domain size and budget.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from orchestrator.contracts.approvals import ApprovalSpec
from orchestrator.contracts.models import (
    SKEWED_COMPONENTS,
    CapacityBudget,
    Count,
    DrainPolicy,
    DurationHours,
    check_targets,
)
from orchestrator.contracts.models import parse_duration_hours as _hours
from orchestrator.contracts.schedule_window import Schedule
from orchestrator.contracts.specs import load_spec
from orchestrator.contracts.version_checks import (
    check_skew,
    check_supersedes,
    check_supersedes_targets,
)

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
_GLOB = r"^[A-Za-z0-9_.*?!\[\]-]+$"

# What a spec may write where a validator reads more than the stored type (the published JSON
# Schema describes the spec a user writes, not the model's stored form).
_CLUSTERS_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "string", "pattern": _GLOB},
            {"type": "array", "items": {"type": "string", "pattern": _GLOB}, "minItems": 1},
        ],
        "description": "a cluster name or glob, or a list of them",
    }
)
_EVERY_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[smhdw]?\s*$"},
        ],
        "description": "how often a held stage asks again, at most 1 h: '30s', '5m' "
        "(a plain number is hours)",
    }
)
_SUPERSEDES_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "string"},
            {"type": "object", "additionalProperties": {"type": "string"}},
        ],
        "description": "a version (with one lower-layer target), or {component: version}",
    }
)


def _count_or_percent(v: object, field: str, minimum: int) -> int | str:
    """A host count (``4``) or a percentage (``"5%"``), as text kept as written."""
    if isinstance(v, bool) or v is None:
        raise ValueError(f"{field}: a count or a percentage like '5%'")
    text = str(v).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise ValueError(f"{field}: {text!r} is not a percentage") from None
        if not 0 <= pct <= 100:
            raise ValueError(f"{field}: a percentage from 0% to 100%")
        return f"{pct:g}%"
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{field}: {text!r} is neither a count nor a percentage") from None
    if count < minimum:
        raise ValueError(f"{field}: at least {minimum}")
    return count


def resolve_count(value: int | str, total: int) -> int:
    """``value`` of ``total``: a count as is, a percentage rounded up (``5%`` of 4 is 1)."""
    if isinstance(value, int):
        return value
    return math.ceil(float(value[:-1]) / 100.0 * total - 1e-9)


class PrometheusGate(BaseModel):
    """A PromQL query against a Prometheus; a non-empty answer holds the stage.

    A URL never carries credentials (``http://user:pw@host/`` is refused: it would be stored in
    the workflow's history and shown in every status); a Prometheus behind basic auth takes
    ``username`` and ``password_file`` (else ``$TRAINCTL_PROMETHEUS_PASSWORD``), both read by
    the worker's activity when it asks: only the user name and the file's path travel.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    url: str = Field(description="Prometheus base URL (http or https, no credentials)")
    #: PromQL query; any answer holds the stage (e.g. ALERTS{alertstate='firing'}).
    query: str = Field(min_length=1, max_length=4000)
    #: How often a held stage asks again: a duration (``30s``, ``5m``); a plain number in a
    #: spec is hours, as everywhere in a spec. At most 1 h. Stored (and read back from a
    #: workflow's input) as a number of seconds.
    every_seconds: Annotated[float, _EVERY_SCHEMA] = Field(
        default=5.0, gt=0, le=3600, alias="every"
    )
    #: The basic-auth user; the password comes from ``password_file`` or the worker's
    #: ``$TRAINCTL_PROMETHEUS_PASSWORD``.
    username: str | None = Field(default=None, min_length=1, max_length=256, pattern=r"^[^:\s]+$")
    #: A file on the worker's machine holding the password (its path travels, never its text).
    password_file: str | None = Field(default=None, min_length=1, max_length=4096)

    @field_validator("url", mode="before")
    @classmethod
    def _url(cls, v: object) -> str:
        """Checked here, every refusal a value error: pydantic's own would quote the URL, and
        a URL may carry a password."""
        if not isinstance(v, str) or not re.fullmatch(r"https?://[^\s]+", v):
            raise ValueError("an http:// or https:// URL without blanks")
        try:
            netloc = urllib.parse.urlsplit(v).netloc
        except ValueError:
            raise ValueError("not a URL") from None
        if "@" in netloc:
            raise ValueError(
                "a URL must not carry credentials (user:password@host); give username and "
                "password_file (or $TRAINCTL_PROMETHEUS_PASSWORD on the worker) instead"
            )
        return v

    @field_validator("every_seconds", mode="before")
    @classmethod
    def _every(cls, v: object) -> float:
        if isinstance(v, int | float) and not isinstance(v, bool):
            # Only the stored form is a number (seconds): the spec loader keeps a spec's
            # numbers as text, so a spec's plain ``every: 5`` arrives as "5", read as hours.
            return float(v)
        seconds = _hours(v, "gates.prometheus.every") * 3600.0  # a plain number is hours
        if seconds > 3600:
            if str(v).strip().replace(".", "", 1).isdigit():
                raise ValueError(
                    f"every: {v} means {float(str(v)):g} h, over the 1 h maximum; write {v}s"
                )
            raise ValueError(f"every: {v} is over the 1 h maximum")
        return seconds

    @model_validator(mode="after")
    def _auth(self) -> PrometheusGate:
        if self.password_file is not None and self.username is None:
            raise ValueError("username: password_file needs a username (basic auth)")
        return self


class Gates(BaseModel):
    """What a stage must pass: a failure limit (count or %), and an optional Prometheus query.

    Without ``max_failures`` the stage fails only when failures among its changed hosts exceed
    the fleet's base rate significantly (``planning.failure_gate``), so one flaky host is
    quarantined and the rollout goes on.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Failed hosts (count or percentage) a stage tolerates; left out, the bad-build rule decides.
    max_failures: int | str | None = None
    #: A Prometheus query that holds the stage while it answers something.
    prometheus: PrometheusGate | None = None

    @field_validator("max_failures", mode="before")
    @classmethod
    def _max_failures(cls, v: object) -> int | str | None:
        return None if v is None else _count_or_percent(v, "max_failures", 0)

    def over(self, base: Gates) -> Gates:
        """These gates, field by field over ``base`` (a stage's over the campaign's)."""
        return Gates(
            max_failures=self.max_failures if self.max_failures is not None else base.max_failures,
            prometheus=self.prometheus or base.prometheus,
        )


class Stage(BaseModel):
    """One step: some clusters (a list of names/globs, or one glob), maybe only some hosts."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The stage's name (unique within the campaign).
    name: str = Field(pattern=_NAME)
    clusters: Annotated[list[str], _CLUSTERS_SCHEMA] = Field(min_length=1)
    #: Hosts per cluster (a count or a %); none: every host of each cluster.
    hosts: int | str | None = None
    bake_hours: DurationHours = Field(default=0.0, alias="bake")
    #: Clusters of the stage rolled at once.
    parallel: Count = Field(default=1, ge=1, le=100)
    #: This stage's gates, field by field over the campaign's.
    gates: Gates | None = None
    #: Sign-off before and/or after the stage (``orchestrator.contracts.approvals``).
    approval: ApprovalSpec | None = None

    @field_validator("clusters", mode="before")
    @classmethod
    def _clusters(cls, v: object) -> list[str]:
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, list) or not items:
            raise ValueError("a cluster glob or a list of them")
        out = []
        for item in items:
            text = str(item)
            if not text or not all(c.isalnum() or c in "_.*?![]-" for c in text):
                raise ValueError(f"{text[:40]!r} is not a cluster name or glob")
            out.append(text)
        return out

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts(cls, v: object) -> int | str | None:
        return None if v is None else _count_or_percent(v, "hosts", 1)

    @field_validator("bake_hours", mode="before")
    @classmethod
    def _bake(cls, v: object) -> float:
        return _hours(v, "bake")


class TrainSettings(BaseModel):
    """How a train the campaign starts is sized (a running train keeps its own).

    Such a train is a campaign's temporary actor: it visits only the stage's hosts and stops
    when the campaign ends, so its default budget is wider than a standing train's 3%
    (``15%`` is 9 hosts of a 64-host ``multi`` cluster; the budget still counts hosts down for
    any reason, and the cluster's arbiter still shares it with every other owner).
    """

    model_config = ConfigDict(extra="forbid")

    #: Hosts in maintenance together in a train the campaign starts.
    domain_size: Count = Field(default=8, ge=1, le=10_000)
    budget: CapacityBudget = Field(default_factory=lambda: CapacityBudget(max_unavailable="15%"))
    #: How long a job may keep a host it asks for (``drain: {max_wait: 30m}``), for the train
    #: it starts and for its driver/CUDA and rollback operations; left out, each keeps its own
    #: default (4h).
    drain: DrainPolicy | None = None


class Scope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: The clusters the campaign may touch (a name or glob).
    cluster: str = Field(default="*", pattern=_GLOB)


class CampaignSpec(BaseModel):
    """One campaign; fields may grow, these keep their meaning."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: The campaign's name: its id is campaign-NAME, one campaign per name.
    name: str = Field(pattern=_NAME)
    #: component -> version the campaign installs (any layer, gpu_driver and cuda included).
    targets: dict[str, str]
    scope: Scope = Field(default_factory=Scope)
    #: The stages, in order; each passes its gates and bakes before the next starts.
    stages: list[Stage] = Field(min_length=1, max_length=100)
    #: The gates every stage passes (a stage may override them field by field).
    gates: Gates = Field(default_factory=Gates)
    #: How a train the campaign starts is sized (a running train keeps its own).
    train: TrainSettings = Field(default_factory=TrainSettings)
    #: Maintenance windows and blackouts (fleet time, ``orchestrator.contracts.schedule_window``):
    #: the campaign's bulk operations start waves only inside them, and a train it starts keeps
    #: to them; a train already running on a cluster keeps its own schedule.
    schedule: Schedule | None = None
    #: When a stage fails and blame names one of this campaign's versions: ``rollback`` (the
    #: default) puts the hosts that got it back on their previous versions through the same
    #: drain/verify path and ends ``rolled_back``; ``hold`` keeps every host as it is and waits
    #: in state ``held`` for an operator (``campaign resume`` once the version is cleared, or
    #: ``campaign abort``).
    on_failure: Literal["rollback", "hold"] = "rollback"
    #: The version skew window (``orchestrator.planning.version_policy``), checked on every
    #: cluster the stages cover before anything starts: ``{os: 3, bios: 2}``, default 3.
    skew: dict[str, int] = Field(default_factory=dict)
    #: The older rollout this campaign replaces: ``{os: "6.8.0-50"}``, or just ``"6.8.0-50"``
    #: when the campaign targets one lower layer. That version leaves the skew window's count,
    #: and a train whose own target it is gets the campaign's version instead once the
    #: campaign rolls over its whole cluster.
    supersedes: Annotated[dict[str, str], _SUPERSEDES_SCHEMA] = Field(default_factory=dict)

    @field_validator("skew", mode="before")
    @classmethod
    def _skew(cls, v: object) -> dict[str, int]:
        return check_skew(v)

    @field_validator("supersedes", mode="before")
    @classmethod
    def _supersedes(cls, v: object, info: ValidationInfo) -> dict[str, str]:
        targets = info.data.get("targets")
        if targets is None:
            return {}  # the targets' own error is the one to show
        if isinstance(v, list | tuple):
            raise ValueError("supersedes: a version, or {component: VERSION}")
        if v is not None and not isinstance(v, dict):
            lower = [c for c in targets if c in SKEWED_COMPONENTS]
            if len(lower) != 1:
                raise ValueError(
                    f"supersedes: a bare version needs exactly one lower-layer target (this "
                    f"campaign has {len(lower)}); write supersedes: {{component: VERSION}}"
                )
            v = {lower[0]: v}
        return check_supersedes_targets(check_supersedes(v), targets)

    @field_validator("schedule")
    @classmethod
    def _no_hard_stop(cls, v: Schedule | None) -> Schedule | None:
        if v is not None and v.hard_stop:
            raise ValueError(
                "schedule.hard_stop: a campaign's bulk operations always finish their wave; "
                "give hard_stop in a train's own spec"
            )
        return v

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, v: object) -> dict[str, str]:
        if not isinstance(v, dict) or not v:
            raise ValueError("targets must map at least one component to a version")
        return check_targets(v, allow_upper=True)

    @model_validator(mode="after")
    def _unique_stages(self) -> CampaignSpec:
        seen: set[str] = set()
        for i, stage in enumerate(self.stages):
            if stage.name in seen:
                raise ValueError(f"stages.{i}.name: {stage.name!r} is used twice")
            seen.add(stage.name)
        return self

    @property
    def workflow_id(self) -> str:
        return campaign_workflow_id(self.name)


def campaign_workflow_id(name: str) -> str:
    """``campaign-<name>``: one campaign per name, no '/' (the UI's deep links)."""
    return f"campaign-{name}"


def load_campaign_spec(path: Path | str) -> CampaignSpec:
    """Read a campaign spec (YAML or JSON); SpecError (a ValueError) naming the field."""
    return load_spec(path, CampaignSpec, what="campaign spec")
