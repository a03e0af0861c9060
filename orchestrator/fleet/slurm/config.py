"""The Slurm backend's config file (``--backend-config FILE``): what Slurm itself does not say.

Slurm knows nodes, jobs and drains; it does not know how a site installs a BIOS or what proves a
node healthy. The file names those commands, which partitions are trainctl's hosts, how failure
domains follow from node names when there is no ``topology.conf``, and the versions the nodes
carry when trainctl first records them. Loaded by ``orchestrator.contracts.specs`` (the one spec
loader),
so versions stay text and errors name the field.

Commands are run by ``/bin/sh -c`` with ``{node}``, ``{component}`` and ``{version}`` replaced
(each shell-quoted), each in a session of its own that is killed whole at its timeout
(``hooks``). A hook exits 0 when the component is installed, 75 (``EX_TEMPFAIL``) for a failure
worth retrying, anything else for one that is not; one that times out or crashes counts as a
failure worth retrying. The health command exits 0 for a healthy node; what it prints on its
first line is the reason kept with the verdict (Slurm's ``HealthCheckProgram`` convention: one
program, no state change of its own needed).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.contracts.breaker_types import BreakerSettings
from orchestrator.contracts.models import parse_duration_hours
from orchestrator.fleet.presets import INITIAL_VERSIONS

#: A hook's exit code for a failure worth retrying (sysexits' EX_TEMPFAIL).
EX_TEMPFAIL = 75
#: Component name of the hook that serves every component without its own.
ANY_COMPONENT = "*"


class Naming(BaseModel):
    """Failure domains from node names: each regex's first group (else its whole match) is the
    node's rack or zone; a node the rule does not match is its own rack, in zone ``default``."""

    model_config = ConfigDict(extra="forbid")
    rack: str = r"^(.*?)\d*$"
    zone: str = r"^()"

    @field_validator("rack", "zone")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as err:
            raise ValueError(f"not a regular expression: {err}") from None
        return v

    def domain(self, node: str) -> tuple[str, str]:
        """(rack, zone) of ``node``."""
        return _match(self.rack, node, node), _match(self.zone, node, "default") or "default"


def _match(pattern: str, node: str, default: str) -> str:
    m = re.search(pattern, node)
    if m is None:
        return default
    return m.group(1) if m.groups() else m.group(0)


class SlurmBackendConfig(BaseModel):
    """How trainctl acts on a Slurm cluster beyond what Slurm's commands do."""

    model_config = ConfigDict(extra="forbid")
    partitions: list[str] = Field(default_factory=list)
    """Partitions whose nodes are trainctl's hosts (empty: every node)."""
    hooks: dict[str, str] = Field(default_factory=dict)
    """component -> install command (``*``: every component without its own)."""
    health_command: str = ""
    """Verification after maintenance (empty: the node's answering slurmd is the only check)."""
    reboot: bool = True
    """Reboot through ``scontrol reboot`` after installing components that need one."""
    reboot_timeout: str = "10m"
    """How long a reboot may take before verification fails the node."""
    naming: Naming = Field(default_factory=Naming)
    initial_versions: dict[str, str] = Field(default_factory=lambda: dict(INITIAL_VERSIONS))
    """Versions recorded for every node at ``fleet init`` (trainctl's record is the truth)."""
    feature_components: list[str] = Field(default_factory=lambda: ["gpu_driver", "cuda"])
    """Components published as node features ``<component>_<version>`` (for ``--constraint``)."""
    piggyback_reservation: bool = True
    """Hold the due nodes of a train's next domain with a maintenance reservation, so a node
    a job frees is still idle when trainctl takes it (``piggyback``)."""
    command_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    max_quiet: str = "24h"
    """The longest quiet hours a job is granted after its start (``quiet_until=`` in its
    ``--comment``): a later instant counts as this long after the job started."""
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    """The cluster's circuit breaker: ``{max_failures: 10, window: 6h}`` (fleet time)."""

    @field_validator("reboot_timeout")
    @classmethod
    def _duration(cls, v: str) -> str:
        parse_duration_hours(v, "reboot_timeout")
        return v

    @field_validator("max_quiet")
    @classmethod
    def _max_quiet(cls, v: str) -> str:
        if parse_duration_hours(v, "max_quiet") < 0:
            raise ValueError("max_quiet: must not be negative (e.g. 24h)")
        return v

    @property
    def max_quiet_hours(self) -> float:
        return parse_duration_hours(self.max_quiet, "max_quiet")

    @property
    def reboot_timeout_seconds(self) -> float:
        return parse_duration_hours(self.reboot_timeout, "reboot_timeout") * 3600.0

    def hook_for(self, component: str) -> str | None:
        return self.hooks.get(component) or self.hooks.get(ANY_COMPONENT)

    def installable(self) -> frozenset[str] | None:
        """Components with an install hook; None when ``*`` serves every component."""
        if self.hooks.get(ANY_COMPONENT):
            return None
        return frozenset(c for c, hook in self.hooks.items() if hook)


def render(template: str, **values: str) -> str:
    """``template`` with each ``{name}`` replaced by the shell-quoted value."""
    out = template
    for key, value in values.items():
        out = out.replace("{" + key + "}", shlex.quote(value))
    return out


def load_backend_config(path: Path | None) -> SlurmBackendConfig:
    """The config at ``path`` (None: every default); SpecError naming the field."""
    if path is None:
        return SlurmBackendConfig()
    from orchestrator.contracts.specs import load_spec

    return load_spec(path, SlurmBackendConfig, what="backend config")
