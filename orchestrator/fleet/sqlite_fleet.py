"""The simulated fleet persisted in its store: a SQLite file (the default) or PostgreSQL.

Every operation is one write transaction on one cluster (``store_db.Database.tx``): load the
cluster, advance it to the caller's fleet time, act, write back what changed and append the
events. On SQLite, ``BEGIN IMMEDIATE``'s write lock serialises worker processes on one machine;
on PostgreSQL the transaction first locks the cluster's row, so workers on many machines acting
on one cluster take turns; either way none can lose another's update or event. A fleet is
built atomically (``ledger_files.create_store``), so a failed ``fleet init`` leaves nothing.

This module is the store itself: opening (and refusing a damaged file), creating, the
transactions and the reads. What it stores lives beside it: the tables and their migrations
in ``store_schema``, a cluster's rows in ``sqlite_rows``, the event log in ``event_log``, and
the bounds on speed and seed in ``settings``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Connection, select
from sqlalchemy import func as sql_func

from orchestrator.contracts.errors import FleetSchemaMismatch, NoFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.fleet_id import META_KEY as FLEET_ID_KEY
from orchestrator.fleet.fleet_id import new_fleet_id
from orchestrator.fleet.kept_clusters import KEPT, check_enabled, check_same, generation
from orchestrator.fleet.ledger_files import connect, create_store, open_store
from orchestrator.fleet.ledger_store import LedgerStore
from orchestrator.fleet.presets import INITIAL_SWITCH_FIRMWARE, Preset, get_preset
from orchestrator.fleet.settings import check_seed, parse_speed
from orchestrator.fleet.sqlite_rows import load_cluster, save_cluster
from orchestrator.fleet.store_db import Database
from orchestrator.fleet.store_schema import (
    SCHEMA_VERSION,
    cluster_locks,
    meta,
    migrate,
    stored_version,
    switches,
)
from orchestrator.fleet.store_schema import clusters as cluster_rows
from orchestrator.fleet.store_url import StoreRef, is_url
from orchestrator.fleet.topology import Topology

_NAMES = select(cluster_rows.c.name).order_by(cluster_rows.c.name)


class FleetUnreadable(NoFleet):
    """The fleet file is there but is not a usable fleet: truncated, scribbled, a directory.

    A :class:`~orchestrator.contracts.errors.NoFleet` (permanent: retrying an activity cannot heal
    it);
    the message names the file and says how to build a new fleet.
    """

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(
            f"fleet: {path} is not a usable fleet database ({' '.join(why.split())}); "
            "rebuild it with `trainctl fleet init --force`",
            field="fleet",
        )


#: SQLite errors that say nothing about the file's contents (the caller may retry or must fix
#: the file system); every other DatabaseError at open means a damaged or foreign file.
_NOT_DAMAGE = ("locked", "busy", "readonly", "read-only", "unable to open", "disk is full", "I/O")


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that never writes: ``mode=ro``, else (no ``-shm`` can be made: a
    read-only directory, an immutable file) ``immutable=1``, which reads the file as it is."""
    uri = path.resolve().as_uri()
    last: sqlite3.DatabaseError | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(
            f"{uri}?{query}", uri=True, timeout=120, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA busy_timeout=120000")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.DatabaseError as err:
            conn.close()
            last = err
            if not any(word in str(err) for word in _NOT_DAMAGE):
                raise
    assert last is not None
    raise last


#: Meta key of a fleet whose clusters schedule as ``simulate --horizon`` (its restart, hours).
EASY_RESTART_KEY = "easy_restart_hours"


class SqliteFleet(LedgerStore):
    """A simulated GPU fleet in one store, shared by every worker using it: a SQLite file
    (every process on the machine) or a PostgreSQL URL (workers on many machines).

    ``read_only``: for commands that only read (``fleet status``): a SQLite file is opened so
    that nothing is ever written (it may be read-only or immutable); a write raises
    ``sqlite3.OperationalError`` (readonly).
    """

    #: Nothing moves a simulated host but trainctl's own workflows and the simulator's clock,
    #: whose hours a scaled poll follows (``FleetBackend.outside_changes``).
    outside_changes = False

    def __init__(self, store: StoreRef, read_only: bool = False) -> None:
        self.store = store
        self.read_only = read_only
        if is_url(store):
            self.db = open_store(store)
            try:
                self.db.require_fleet()
                migrate(self.db, str(store))
                self._load_meta(str(store))
            except BaseException:
                self.db.close()
                raise
            self._topology: Topology | None = None
            return
        path = Path(store)
        if not path.exists():
            raise FileNotFoundError(f"no fleet at {path}: run `trainctl fleet init` first")
        if not path.is_file():
            raise FleetUnreadable(path, "not a regular file")
        self.path = path
        try:
            raw = _connect_read_only(path) if read_only else connect(path)
        except sqlite3.DatabaseError as err:
            if any(word in str(err) for word in _NOT_DAMAGE):
                raise
            raise FleetUnreadable(path, str(err)) from None
        self.db = Database.sqlite(raw, str(path))
        try:
            if read_only and stored_version(self.db) < SCHEMA_VERSION:
                writer = open_store(path)  # an old file is migrated once, by whoever opens it
                try:
                    migrate(writer, str(path))
                finally:
                    writer.close()
            else:  # read-only and current: only refuses a newer schema, writes nothing
                migrate(self.db, str(path))
            self._load_meta(str(path))
        except FleetSchemaMismatch:
            self.db.close()
            raise
        except sqlite3.DatabaseError as err:
            self.db.close()
            if any(word in str(err) for word in _NOT_DAMAGE):
                raise
            raise FleetUnreadable(path, str(err)) from None
        except NoFleet:  # unreadable, or a damaged record (store_schema.DamagedRecord)
            self.db.close()
            raise
        except (KeyError, ValueError, TypeError, OverflowError) as err:
            self.db.close()
            raise FleetUnreadable(path, str(err)) from None
        self._topology = None

    def _load_meta(self, where: str) -> None:
        meta_rows = self.get_meta()
        #: this store among the process's kept clusters: where it is and which fleet (a fleet
        #: built anew at the same path is another)
        self._kept_key = f"{where}#{meta_rows.get(FLEET_ID_KEY, '')}"
        try:
            self.seed = check_seed(int(meta_rows["seed"]))
            self.preset: Preset = get_preset(meta_rows["preset"])
            self.speed = parse_speed(float(meta_rows["speed"]))
            self.anchor_wall = datetime.fromisoformat(meta_rows["anchor_wall"])
            easy = meta_rows.get(EASY_RESTART_KEY)
            self.easy_restart_hours = None if easy is None else float(easy)
            if self.anchor_wall.tzinfo is None:
                raise ValueError("anchor_wall has no time zone")
        except (KeyError, ValueError, TypeError, OverflowError) as err:
            why = f"meta {err.args[0]!r} is missing" if isinstance(err, KeyError) else str(err)
            raise FleetUnreadable(where, why) from None

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            self._topology = Topology(self.preset)
        return self._topology

    # ----------------------------------------------------------------- creation
    @classmethod
    def create(
        cls,
        path: StoreRef,
        preset: Preset,
        seed: int,
        speed: float,
        wall: datetime | None = None,
        force: bool = True,
        easy_restart_hours: float | None = None,
    ) -> SqliteFleet:
        """Build a fleet from ``preset`` atomically at ``path`` (a SQLite file, or a
        PostgreSQL URL: one holding a fleet is replaced only with ``force``), then open it.

        ValueError naming ``seed`` or ``speed`` for values no fleet can run with. With
        ``easy_restart_hours`` its clusters schedule as ``simulate --horizon`` does: EASY
        backfill, and a requeued job restarting for that long (``JobScheduler.use_easy``).
        """
        if not isinstance(preset, Preset):
            raise TypeError(f"preset: expected a Preset, got {type(preset).__name__}")
        check_seed(seed)
        speed = parse_speed(speed)
        if not is_url(path) and Path(path).is_dir():
            raise ValueError(f"fleet: {path} is a directory")
        wall = wall or datetime.now(UTC)
        meta_rows = {
            "seed": seed,
            "preset": preset.name,
            "speed": speed,
            "anchor_wall": wall.isoformat(),
            "schema_version": SCHEMA_VERSION,
            FLEET_ID_KEY: new_fleet_id(),
        }
        if easy_restart_hours is not None:
            meta_rows[EASY_RESTART_KEY] = float(easy_restart_hours)

        def fill(conn: Connection) -> None:
            conn.execute(meta.insert(), [{"key": k, "value": str(v)} for k, v in meta_rows.items()])
            topo = Topology(preset)
            conn.execute(
                switches.insert(),
                [
                    {"name": n, "tier": tier, "cluster": c, "firmware": INITIAL_SWITCH_FIRMWARE}
                    for n, tier, c in topo.switches
                ],
            )
            for cluster in preset.cluster_names():
                save_cluster(conn, build_cluster(preset, seed, cluster, topo), new=True)
                conn.execute(cluster_locks.insert().values(cluster=cluster))

        create_store(path, fill, force)
        return cls(path)

    # -------------------------------------------------------------------- clock
    def fleet_time(self, wall: datetime | None = None, cluster: str | None = None) -> float:
        """Fleet hours at wall time ``wall`` (the caller's workflow.now()), at the fleet's speed."""
        wall = wall or datetime.now(UTC)
        return max(0.0, (wall - self.anchor_wall).total_seconds() * self.speed / 3600.0)

    @contextmanager
    def cluster(self, name: str, wall: datetime | None = None) -> Iterator[ClusterSim]:
        """Load ``name`` advanced to the caller's fleet time; changes commit on clean exit.

        The process keeps the cluster it saved and reuses it while nothing else wrote it
        (``kept_clusters``); a nested transaction (its commit is its caller's) neither reuses
        nor keeps."""
        outer = not self.db.in_transaction
        key = self._kept_key
        at: int | None = None
        with self.db.tx(name) as conn:
            sim = KEPT.take(key, conn, name) if outer else None
            if sim is None:
                sim = self._load(conn, name)
            elif check_enabled():
                check_same(sim, self._load(conn, name))
            sim.advance(self.fleet_time(wall, name))
            yield sim
            save_cluster(conn, sim)
            if outer:
                at = generation(conn, name)
        KEPT.put(key, name, at, sim)  # committed: kept for the next transaction

    def peek(self, name: str, wall: datetime | None = None) -> ClusterSim:
        """The cluster advanced to the caller's fleet time, without writing anything back."""
        with self.db.snapshot() as conn:
            sim = self._load(conn, name)
            sim.advance(self.fleet_time(wall, name))
        return sim

    def _load(self, conn: Connection, name: str) -> ClusterSim:
        """Cluster ``name`` from its rows, scheduling as the fleet was built to."""
        sim = load_cluster(conn, name, self.seed, self.preset)
        sim.anchor_wall = self.anchor_wall
        if self.easy_restart_hours is not None:
            sim.use_easy(self.easy_restart_hours)
        return sim

    # ------------------------------------------------------------------ reads
    def cluster_names(self) -> list[str]:
        return [r[0] for r in self.db.read(_NAMES)]

    def installable_components(self) -> frozenset[str] | None:
        return None  # the simulated fleet installs every component

    def switch_versions(self, cluster: str | None = None) -> dict[str, dict[str, int]]:
        """Switch firmware per switch kind (rack, spine, aggregation): version -> switches."""
        query = select(switches.c.tier, switches.c.firmware, sql_func.count())
        if cluster is not None:
            query = query.where(switches.c.cluster == cluster)
        out: dict[str, dict[str, int]] = {}
        for tier, firmware, n in self.db.read(query.group_by(switches.c.tier, switches.c.firmware)):
            out.setdefault(tier, {})[firmware] = n
        return {t: dict(sorted(v.items(), key=lambda kv: -kv[1])) for t, v in sorted(out.items())}
