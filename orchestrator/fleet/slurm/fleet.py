"""Slurm clusters as a ``FleetBackend``: Slurm for nodes and jobs, the fleet store for the record.

``SlurmFleet`` opens trainctl's record of one or more Slurm clusters (``store``): a fleet is
many clusters, each with its own ``slurm.conf`` (its own controller and ``ClusterName``) and
its own backend config (the site's hooks there). It hands out one ``SlurmCluster`` session per
transaction (``backend``), and keeps fleet time as wall time. ``create`` reads the nodes of the
configured partitions of every cluster through Slurm and records them on the config's initial
versions.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from orchestrator.contracts.errors import (
    NoFleet,
    PermanentError,
    UnknownCluster,
)
from orchestrator.contracts.models import HostState
from orchestrator.fleet.event_log import append_events
from orchestrator.fleet.ledger_files import open_store
from orchestrator.fleet.ledger_rows import load_hosts, save_hosts
from orchestrator.fleet.ledger_store import LedgerStore
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm import store
from orchestrator.fleet.slurm.backend import SlurmCluster
from orchestrator.fleet.slurm.commands import SlurmCommands
from orchestrator.fleet.slurm.config import (
    SlurmBackendConfig,
)
from orchestrator.fleet.slurm.topology import failure_domains_of
from orchestrator.fleet.store_schema import migrate
from orchestrator.fleet.store_url import StoreRef, is_url

if TYPE_CHECKING:
    from orchestrator.contracts.backend import FleetBackend

S = HostState


@dataclass(frozen=True)
class SlurmMember:
    """One Slurm cluster of the fleet: where its controller is and how its site installs."""

    cluster: str
    slurm_conf: Path
    config: SlurmBackendConfig
    config_path: str = ""

    @property
    def commands(self) -> SlurmCommands:
        return SlurmCommands(self.slurm_conf, self.config.command_timeout_seconds)

    def to_json(self) -> dict[str, str]:
        return {
            "cluster": self.cluster,
            "slurm_conf": str(self.slurm_conf),
            "backend_config": self.config.model_dump_json(),
            "backend_config_path": self.config_path,
        }


def members_of(meta: dict[str, str]) -> list[SlurmMember]:
    """The clusters a fleet file records (a file of one cluster, written before fleets of
    several, keeps it in single keys)."""
    rows = json.loads(meta["slurm_clusters"]) if "slurm_clusters" in meta else [meta]
    return [
        SlurmMember(
            r["cluster"],
            Path(r["slurm_conf"]),
            SlurmBackendConfig.model_validate(json.loads(r["backend_config"])),
            r.get("backend_config_path", ""),
        )
        for r in rows
    ]


@dataclass(frozen=True)
class SlurmShape:
    """What the command line reads of a fleet's shape (the simulated fleet's ``preset``)."""

    name: str
    hosts_per_cluster: int
    hosts_per_rack: int = 1
    clusters: int = 1


class SlurmFleet(LedgerStore):
    """Slurm clusters as a ``FleetBackend``: Slurm for nodes and jobs, the store for the record."""

    speed = 1.0  # fleet time is wall time
    outside_changes = True  # Slurm, its jobs and its operators move nodes unannounced
    read_only = False  # a session reads Slurm and reconciles the record: always writable

    def __init__(self, path: StoreRef) -> None:
        if not is_url(path) and not Path(path).exists():
            raise FileNotFoundError(f"no fleet at {path}: run `trainctl fleet init` first")
        self.store = path
        self.db = open_store(path)
        try:
            self.db.require_fleet()
            migrate(self.db, str(path))
            meta = self.get_meta()
        except BaseException:
            self.db.close()
            raise
        if meta.get("backend") != store.BACKEND:
            self.db.close()
            raise NoFleet(f"fleet: {path} is not a Slurm fleet", field="fleet")
        self.meta = meta
        self.anchor_wall = datetime.fromisoformat(meta["anchor_wall"])
        self.members = {m.cluster: m for m in members_of(meta)}
        first = next(iter(self.members.values()))
        # the first cluster's, for callers that know a fleet of one
        self.cluster_name, self.slurm_conf, self.config = (
            first.cluster,
            first.slurm_conf,
            first.config,
        )
        self.commands = first.commands
        self._commands = {c: m.commands for c, m in self.members.items()}
        self.seed = 0
        sizes = [self.hosts_in(c) for c in self.members]
        racks = Counter(
            (c, rack) for c in self.members for rack, _ in self.failure_domains(c).values()
        )
        self.preset = SlurmShape(
            "slurm", max(sizes), max(racks.values(), default=1), len(self.members)
        )

    @classmethod
    def create(
        cls,
        path: StoreRef,
        slurm_conf: Path,
        config: SlurmBackendConfig,
        config_path: Path | None = None,
        wall: datetime | None = None,
        more: Sequence[tuple[Path, SlurmBackendConfig, Path | None]] = (),
        force: bool = True,
    ) -> SlurmFleet:
        """Record every node of the configured partitions of each cluster (``slurm_conf``,
        then ``more``) on its config's ``initial_versions``. Two clusters of one name, or one
        node name in two clusters, are refused (field ``slurm_conf``)."""
        clusters: dict[str, list[HostRec]] = {}
        members: list[SlurmMember] = []
        owner: dict[str, str] = {}
        for conf, cfg, cfg_path in [(slurm_conf, config, config_path), *more]:
            cluster = cluster_name_of(conf)
            if cluster in clusters:
                raise PermanentError(
                    f"slurm_conf: two clusters named {cluster!r} ({conf}); each slurm.conf "
                    "needs its own ClusterName",
                    field="slurm_conf",
                )
            hosts = _cluster_hosts(conf, cfg)
            for h in hosts:
                if h.name in owner:
                    raise PermanentError(
                        f"slurm_conf: node {h.name} is in clusters {owner[h.name]} and "
                        f"{cluster}; node names must be unique across the fleet",
                        field="slurm_conf",
                    )
                owner[h.name] = cluster
            clusters[cluster] = hosts
            members.append(SlurmMember(cluster, conf.resolve(), cfg, str(cfg_path or "")))
        first = members[0].to_json()
        meta = {
            "slurm_conf": first["slurm_conf"],
            "backend_config": first["backend_config"],
            "backend_config_path": first["backend_config_path"],
            "slurm_clusters": json.dumps([m.to_json() for m in members]),
        }
        store.new_store(path, clusters, meta, wall, force)
        return cls(path)

    # ------------------------------------------------------------------ shape
    def cluster_names(self) -> list[str]:
        return list(self.members)

    def installable_components(self) -> frozenset[str] | None:
        """Components every cluster's backend config has an install hook for (None: ``*``
        covers all everywhere): what any train, operation or campaign may target."""
        sets = [s for m in self.members.values() if (s := m.config.installable()) is not None]
        return frozenset.intersection(*sets) if sets else None

    def _require(self, cluster: str) -> None:
        if cluster not in self.members:
            raise UnknownCluster(f"cluster: unknown cluster {cluster!r}", field="cluster")

    # ------------------------------------------------------------------ clock
    def fleet_time(self, wall: datetime | None = None, cluster: str | None = None) -> float:
        wall = wall or datetime.now(UTC)
        return max(0.0, (wall - self.anchor_wall).total_seconds() / 3600.0)

    # ----------------------------------------------------------- sessions
    def _session(
        self, conn: Connection, name: str, wall: datetime | None, writable: bool
    ) -> SlurmCluster:
        self._require(name)
        b = SlurmCluster(
            name,
            self.fleet_time(datetime.now(UTC)),
            self.anchor_wall.timestamp(),
            load_hosts(conn, name),
            store.load_state(conn, name),
            self._commands[name],
            self.members[name].config,
            writable,
        )
        b.sync()
        return b

    @contextmanager
    def cluster(self, name: str, wall: datetime | None = None) -> Iterator[SlurmCluster]:
        """One session: Slurm read and reconciled, then the caller's changes; the record
        commits on a clean exit (Slurm's own changes cannot roll back: the next session's
        reconciling finds them)."""
        self._require(name)
        with self.db.tx(name) as conn:
            b = self._session(conn, name, wall, writable=True)
            yield b
            save_hosts(conn, name, [b.hosts[n] for n in sorted(b.dirty_hosts)])
            store.save_state(conn, name, b.state)
            append_events(conn, name, b.events)

    def peek(self, name: str, wall: datetime | None = None) -> SlurmCluster:
        with self.db.snapshot() as conn:
            return self._session(conn, name, wall, writable=False)

    def switch_versions(self, cluster: str | None = None) -> dict[str, dict[str, int]]:
        """Slurm knows no switch firmware: none to report (``fleet status``)."""
        return {}


def _cluster_hosts(slurm_conf: Path, config: SlurmBackendConfig) -> list[HostRec]:
    """The nodes of the configured partitions of one cluster, as new host records."""
    nodes = SlurmCommands(slurm_conf, config.command_timeout_seconds).nodes()
    if config.partitions:
        nodes = [n for n in nodes if set(n.partitions) & set(config.partitions)]
    if not nodes:
        raise PermanentError(
            f"slurm_conf: no nodes in partitions {config.partitions or 'any'} of {slurm_conf}",
            field="slurm_conf",
        )
    names = sorted(n.name for n in nodes)
    domains = failure_domains_of(slurm_conf, names, config.naming)
    return [
        HostRec(
            name=n,
            zone=domains[n][1],
            rack=domains[n][0],
            state=S.IN_SERVICE,
            versions=dict(config.initial_versions),
        )
        for n in names
    ]


def cluster_name_of(slurm_conf: Path) -> str:
    """``ClusterName`` of a slurm.conf (``slurm`` if it names none)."""
    try:
        text = slurm_conf.read_text()
    except OSError as err:
        raise PermanentError(
            f"slurm_conf: cannot read {slurm_conf}: {err}", field="slurm_conf"
        ) from None
    m = re.search(r"^\s*ClusterName\s*=\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
    return m.group(1) if m else "slurm"


if TYPE_CHECKING:

    def _is_a_fleet_backend(f: SlurmFleet) -> FleetBackend:
        """For mypy: the Slurm fleet implements the whole backend Protocol."""
        return f


__all__ = ["SlurmFleet", "SlurmMember", "SlurmShape", "cluster_name_of", "members_of"]
