"""The simulated fleet persisted in SQLite: the default fleet backend.

Every operation is one ``BEGIN IMMEDIATE`` transaction: load the cluster, advance it to the
caller's fleet time, act, write back what changed and append the events. SQLite's write lock
serialises worker processes on one machine, so none can lose another's update or event. A fleet
is built in a temporary file and renamed into place, so a failed ``fleet init`` leaves nothing.

This module is the store itself: opening (and refusing a damaged file), creating, the
transactions and the reads. What it stores lives beside it: the tables and their migrations
in ``sqlite_schema``, a cluster's rows in ``sqlite_rows``, the logical clocks' turns in
``sqlite_clock``, the event log in ``event_log``, and the bounds on speed and seed in
``settings``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.contracts.backend import ClockMember, ClockRelease, ClockTurn
from orchestrator.contracts.errors import FleetSchemaMismatch, NoFleet
from orchestrator.fleet import sqlite_clock
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.fleet_id import META_KEY as FLEET_ID_KEY
from orchestrator.fleet.fleet_id import new_fleet_id
from orchestrator.fleet.ledger_files import connect, create_file
from orchestrator.fleet.ledger_store import LedgerStore
from orchestrator.fleet.presets import INITIAL_SWITCH_FIRMWARE, Preset, get_preset
from orchestrator.fleet.settings import MAX_SPEED, check_seed, parse_speed
from orchestrator.fleet.sqlite_rows import load_cluster, save_cluster
from orchestrator.fleet.sqlite_schema import SCHEMA_VERSION, migrate
from orchestrator.fleet.sqlite_schema import _schema_version as schema_version
from orchestrator.fleet.topology import Topology


class FleetUnreadable(NoFleet):
    """The fleet file is there but is not a usable fleet: truncated, scribbled, a directory.

    A :class:`~orchestrator.contracts.errors.NoFleet` (permanent: retrying an activity cannot heal
    it);
    the message names the file and says how to build a new fleet.
    """

    def __init__(self, path: Path, why: str) -> None:
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


class SqliteFleet(LedgerStore):
    """A simulated GPU fleet in one SQLite file, shared by every process on the machine.

    ``read_only``: for commands that only read (``fleet status``): the file is opened so that
    nothing is ever written (it may be read-only or immutable); a write raises
    ``sqlite3.OperationalError`` (readonly).
    """

    def __init__(self, path: Path, read_only: bool = False) -> None:
        if not path.exists():
            raise FileNotFoundError(f"no fleet at {path}: run `trainctl fleet init` first")
        if not path.is_file():
            raise FleetUnreadable(path, "not a regular file")
        self.path = path
        self.read_only = read_only
        try:
            self.conn = _connect_read_only(path) if read_only else connect(path)
        except sqlite3.DatabaseError as err:
            if any(word in str(err) for word in _NOT_DAMAGE):
                raise
            raise FleetUnreadable(path, str(err)) from None
        try:
            if read_only and schema_version(self.conn) < SCHEMA_VERSION:
                writer = connect(path)  # an old file is migrated once, by whoever opens it
                try:
                    migrate(writer, path)
                finally:
                    writer.close()
            else:  # read-only and current: only refuses a newer schema, writes nothing
                migrate(self.conn, path)
            meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
            self.seed = check_seed(int(meta["seed"]))
            self.preset: Preset = get_preset(meta["preset"])
            self.speed = float(meta["speed"])
            if self.speed != MAX_SPEED:
                parse_speed(self.speed)
            self.anchor_wall = datetime.fromisoformat(meta["anchor_wall"])
            if self.anchor_wall.tzinfo is None:
                raise ValueError("anchor_wall has no time zone")
        except FleetSchemaMismatch:
            self.conn.close()
            raise
        except sqlite3.DatabaseError as err:
            self.conn.close()
            if any(word in str(err) for word in _NOT_DAMAGE):
                raise
            raise FleetUnreadable(path, str(err)) from None
        except (KeyError, ValueError, TypeError, OverflowError) as err:
            self.conn.close()
            why = f"meta {err.args[0]!r} is missing" if isinstance(err, KeyError) else str(err)
            raise FleetUnreadable(path, why) from None
        self._topology: Topology | None = None

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            self._topology = Topology(self.preset)
        return self._topology

    # ----------------------------------------------------------------- creation
    @classmethod
    def create(
        cls, path: Path, preset: Preset, seed: int, speed: float, wall: datetime | None = None
    ) -> SqliteFleet:
        """Build a fleet from ``preset`` into a temporary file, then move it to ``path``.

        ValueError naming ``seed`` or ``speed`` for values no fleet can run with.
        """
        if not isinstance(preset, Preset):
            raise TypeError(f"preset: expected a Preset, got {type(preset).__name__}")
        check_seed(seed)
        if speed != MAX_SPEED:
            speed = parse_speed(speed)
        if path.is_dir():
            raise ValueError(f"fleet: {path} is a directory")
        wall = wall or datetime.now(UTC)
        meta = {
            "seed": seed,
            "preset": preset.name,
            "speed": speed,
            "anchor_wall": wall.isoformat(),
            "schema_version": SCHEMA_VERSION,
            FLEET_ID_KEY: new_fleet_id(),
        }

        def fill(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()]
            )
            topo = Topology(preset)
            conn.executemany(
                "INSERT INTO switches VALUES (?, ?, ?, ?)",
                [(n, tier, c, INITIAL_SWITCH_FIRMWARE) for n, tier, c in topo.switches],
            )
            for cluster in preset.cluster_names():
                save_cluster(conn, build_cluster(preset, seed, cluster, topo), new=True)
                conn.execute("INSERT INTO clocks VALUES (?, 0.0)", (cluster,))

        create_file(path, fill)
        return cls(path)

    # -------------------------------------------------------------------- clock
    @property
    def logical(self) -> bool:
        return self.speed == MAX_SPEED

    def fleet_time(self, wall: datetime | None = None, cluster: str | None = None) -> float:
        """Fleet hours of ``cluster`` at wall time ``wall`` (the caller's workflow.now()).

        A scaled fleet has one clock derived from ``wall``; a logical fleet has one per cluster
        (its row in ``clocks``), which only that cluster's parties move.
        """
        if self.logical:
            if cluster is None:
                raise ValueError("cluster: a fleet at speed max keeps one clock per cluster")
            return sqlite_clock.clock_now(self.conn, cluster)
        wall = wall or datetime.now(UTC)
        return max(0.0, (wall - self.anchor_wall).total_seconds() * self.speed / 3600.0)

    def advance_clock(self, cluster: str, target_hours: float) -> float:
        """Move ``cluster``'s logical clock forward to ``target_hours``; the cluster's hour."""
        with self._tx():
            now = self.fleet_time(cluster=cluster)
            if self.logical and target_hours > now:
                sqlite_clock.set_clock(self.conn, cluster, target_hours)
                return target_hours
            return now

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
        """Register ``party``'s wait on ``cluster``'s logical clock and step it (see
        ``FleetBackend.clock_wait``): one transaction, so two parties never both take a turn."""
        seen = (wall or datetime.now(UTC)).timestamp()
        with self._tx() as conn:
            now = self.fleet_time(cluster=cluster)
            return sqlite_clock.wait(
                conn, cluster, party, epoch, target_hours, children, wakes, now, seen
            )

    def clock_leave(
        self,
        cluster: str,
        party: str | None = None,
        owner: str | None = None,
        wall: datetime | None = None,
    ) -> tuple[ClockRelease, ...]:
        """Remove ``party`` (or every party of ``owner``) from ``cluster``'s clock and step it."""
        if not self.logical:
            return ()
        seen = (wall or datetime.now(UTC)).timestamp()
        with self._tx() as conn:
            return sqlite_clock.leave(conn, cluster, party, owner, seen)

    def clock_parties(self, cluster: str) -> list[dict[str, Any]]:
        """The parties of ``cluster``'s logical clock, in turn order (for status and tests)."""
        return sqlite_clock.parties(self.conn, cluster)

    # ---------------------------------------------------------- transactions
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    @contextmanager
    def cluster(self, name: str, wall: datetime | None = None) -> Iterator[ClusterSim]:
        """Load ``name`` advanced to the caller's fleet time; changes commit on clean exit."""
        with self._tx() as conn:
            sim = load_cluster(conn, name, self.seed, self.preset)
            sim.advance(self.fleet_time(wall, name))
            yield sim
            save_cluster(conn, sim)

    def peek(self, name: str, wall: datetime | None = None) -> ClusterSim:
        """The cluster advanced to the caller's fleet time, without writing anything back."""
        self.conn.execute("BEGIN")
        try:
            sim = load_cluster(self.conn, name, self.seed, self.preset)
            sim.advance(self.fleet_time(wall, name))
        finally:
            self.conn.execute("ROLLBACK")
        return sim

    # ------------------------------------------------------------------ reads
    def cluster_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM clusters ORDER BY name")]

    def installable_components(self) -> frozenset[str] | None:
        return None  # the simulated fleet installs every component

    def switch_versions(self, cluster: str | None = None) -> dict[str, dict[str, int]]:
        """Switch firmware per switch kind (rack, spine, aggregation): version -> switches."""
        sql = "SELECT tier, firmware, COUNT(*) FROM switches"
        args: tuple[str, ...] = ()
        if cluster is not None:
            sql, args = sql + " WHERE cluster = ?", (cluster,)
        out: dict[str, dict[str, int]] = {}
        for tier, firmware, n in self.conn.execute(sql + " GROUP BY tier, firmware", args):
            out.setdefault(tier, {})[firmware] = n
        return {t: dict(sorted(v.items(), key=lambda kv: -kv[1])) for t, v in sorted(out.items())}
