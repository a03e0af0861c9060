"""A Slurm cluster as a ``FleetBackend``: Slurm for nodes and jobs, SQLite for the record.

``SlurmFleet`` opens trainctl's record of one Slurm cluster (``store``), hands out one
``SlurmCluster`` session per transaction (``backend``), and keeps fleet time as wall time: there
is no logical clock to wait on, so clock waits return at once. ``create`` reads the nodes of the
configured partitions through Slurm and records them on the config's initial versions.
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
from typing import TYPE_CHECKING, Any

from orchestrator.contracts.backend import (
    ClockMember,
    ClockRelease,
    ClockTurn,
)
from orchestrator.contracts.errors import (
    NoFleet,
    PermanentError,
    UnknownCluster,
)
from orchestrator.contracts.models import HostState
from orchestrator.fleet.event_log import append_events
from orchestrator.fleet.ledger_files import connect
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
from orchestrator.fleet.sqlite_schema import migrate

if TYPE_CHECKING:
    from orchestrator.contracts.backend import FleetBackend

S = HostState


@dataclass(frozen=True)
class SlurmShape:
    """What the command line reads of a fleet's shape (the simulated fleet's ``preset``)."""

    name: str
    hosts_per_cluster: int
    hosts_per_rack: int = 1
    clusters: int = 1


class SlurmFleet(LedgerStore):
    """A Slurm cluster as a ``FleetBackend``: Slurm for nodes and jobs, SQLite for the record."""

    speed = 1.0  # fleet time is wall time
    read_only = False  # a session reads Slurm and reconciles the record: always writable

    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(f"no fleet at {path}: run `trainctl fleet init` first")
        self.path = path
        self.conn = connect(path)
        migrate(self.conn, path)
        meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("backend") != store.BACKEND:
            self.conn.close()
            raise NoFleet(f"fleet: {path} is not a Slurm fleet", field="fleet")
        self.meta = meta
        self.anchor_wall = datetime.fromisoformat(meta["anchor_wall"])
        self.cluster_name = meta["cluster"]
        self.slurm_conf = Path(meta["slurm_conf"])
        self.config = SlurmBackendConfig.model_validate(json.loads(meta["backend_config"]))
        self.commands = SlurmCommands(self.slurm_conf, self.config.command_timeout_seconds)
        self.seed = 0
        racks = Counter(rack for rack, _ in self.failure_domains(self.cluster_name).values())
        self.preset = SlurmShape(
            "slurm", self.hosts_in(self.cluster_name), max(racks.values(), default=1)
        )

    @classmethod
    def create(
        cls,
        path: Path,
        slurm_conf: Path,
        config: SlurmBackendConfig,
        config_path: Path | None = None,
        wall: datetime | None = None,
    ) -> SlurmFleet:
        """Record every node of the configured partitions on ``config.initial_versions``."""
        commands = SlurmCommands(slurm_conf, config.command_timeout_seconds)
        nodes = commands.nodes()
        if config.partitions:
            nodes = [n for n in nodes if set(n.partitions) & set(config.partitions)]
        if not nodes:
            raise PermanentError(
                f"slurm_conf: no nodes in partitions {config.partitions or 'any'} of {slurm_conf}",
                field="slurm_conf",
            )
        cluster = cluster_name_of(slurm_conf)
        names = sorted(n.name for n in nodes)
        domains = failure_domains_of(slurm_conf, names, config.naming)
        hosts = [
            HostRec(
                name=n,
                zone=domains[n][1],
                rack=domains[n][0],
                state=S.IN_SERVICE,
                versions=dict(config.initial_versions),
            )
            for n in names
        ]
        meta = {
            "slurm_conf": str(slurm_conf.resolve()),
            "backend_config": config.model_dump_json(),
            "backend_config_path": str(config_path or ""),
        }
        store.create_store(path, cluster, hosts, meta, wall)
        return cls(path)

    # ------------------------------------------------------------------ shape
    def cluster_names(self) -> list[str]:
        return [self.cluster_name]

    def installable_components(self) -> frozenset[str] | None:
        """Components the backend config has an install hook for (None: ``*`` covers all)."""
        return self.config.installable()

    def _require(self, cluster: str) -> None:
        if cluster != self.cluster_name:
            raise UnknownCluster(f"cluster: unknown cluster {cluster!r}", field="cluster")

    # ------------------------------------------------------------------ clock
    def fleet_time(self, wall: datetime | None = None, cluster: str | None = None) -> float:
        wall = wall or datetime.now(UTC)
        return max(0.0, (wall - self.anchor_wall).total_seconds() / 3600.0)

    def advance_clock(self, cluster: str, target_hours: float) -> float:
        return self.fleet_time(cluster=cluster)

    def clock_wait(
        self,
        cluster: str,
        party: ClockMember,
        epoch: str,
        target_hours: float | None,
        children: Sequence[str] | None = None,
        wakes: Sequence[str] = (),
        wall: datetime | None = None,
    ) -> ClockTurn:
        return ClockTurn(self.fleet_time(wall, cluster), True)

    def clock_leave(
        self,
        cluster: str,
        party: str | None = None,
        owner: str | None = None,
        wall: datetime | None = None,
    ) -> tuple[ClockRelease, ...]:
        return ()

    # ----------------------------------------------------------- sessions
    def _session(self, name: str, wall: datetime | None, writable: bool) -> SlurmCluster:
        self._require(name)
        b = SlurmCluster(
            name,
            self.fleet_time(datetime.now(UTC)),
            self.anchor_wall.timestamp(),
            load_hosts(self.conn, name),
            store.load_state(self.conn, name),
            self.commands,
            self.config,
            writable,
        )
        b.sync()
        return b

    @contextmanager
    def cluster(self, name: str, wall: datetime | None = None) -> Iterator[SlurmCluster]:
        """One session: Slurm read and reconciled, then the caller's changes; the record
        commits on a clean exit (Slurm's own changes cannot roll back: the next session's
        reconciling finds them)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            b = self._session(name, wall, writable=True)
            yield b
            save_hosts(self.conn, name, [b.hosts[n] for n in sorted(b.dirty_hosts)])
            store.save_state(self.conn, name, b.state)
            append_events(self.conn, name, b.events)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def peek(self, name: str, wall: datetime | None = None) -> SlurmCluster:
        self.conn.execute("BEGIN")
        try:
            return self._session(name, wall, writable=False)
        finally:
            self.conn.execute("ROLLBACK")

    def switch_versions(self, cluster: str | None = None) -> dict[str, dict[str, int]]:
        """Slurm knows no switch firmware: none to report (``fleet status``)."""
        return {}

    def clock_parties(self, cluster: str) -> list[dict[str, Any]]:
        """Fleet time is wall time: no logical clock, no parties."""
        return []


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


__all__ = ["SlurmFleet", "SlurmShape", "cluster_name_of"]
