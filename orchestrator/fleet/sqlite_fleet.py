"""The simulated fleet persisted in SQLite: the default fleet backend.

Every operation is one ``BEGIN IMMEDIATE`` transaction: load the cluster, advance it to the
caller's fleet time, act, write back what changed and append the events. SQLite's write lock
serialises worker processes on one machine, so none can lose another's update or event. A fleet
is built in a temporary file and renamed into place, so a failed ``fleet init`` leaves nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.constants import LOGICAL_CLOCK
from orchestrator.errors import FleetSchemaMismatch, NoFleet, UnknownCluster
from orchestrator.fleet.backend import ClockMember, ClockRelease, ClockTurn
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim, ClusterState, Event, HostRec, JobRec
from orchestrator.presets import INITIAL_SWITCH_FIRMWARE, Preset, get_preset
from orchestrator.topology import Topology

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE clusters (name TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE hosts (
    name TEXT PRIMARY KEY, cluster TEXT NOT NULL, zone TEXT NOT NULL, rack TEXT NOT NULL,
    state TEXT NOT NULL, versions TEXT NOT NULL, job_id INTEGER, reason TEXT NOT NULL,
    owner TEXT NOT NULL, repair_until REAL, defect TEXT, last_visit REAL,
    verified INTEGER NOT NULL, updates INTEGER NOT NULL, last_boot REAL);
CREATE INDEX hosts_cluster ON hosts(cluster);
CREATE TABLE jobs (
    cluster TEXT NOT NULL, id INTEGER NOT NULL, size INTEGER NOT NULL, work REAL NOT NULL,
    ckpt REAL NOT NULL, submitted REAL NOT NULL, hosts TEXT NOT NULL, start REAL,
    driver TEXT NOT NULL, cuda TEXT NOT NULL, state TEXT NOT NULL, interruptions INTEGER NOT NULL,
    PRIMARY KEY (cluster, id));
CREATE INDEX jobs_live ON jobs(cluster, state);
CREATE TABLE switches (
    name TEXT PRIMARY KEY, tier TEXT NOT NULL, cluster TEXT, firmware TEXT NOT NULL);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, cluster TEXT NOT NULL,
    actor TEXT NOT NULL, kind TEXT NOT NULL, host TEXT, detail TEXT NOT NULL);
CREATE TABLE clocks (cluster TEXT PRIMARY KEY, now REAL NOT NULL);
CREATE TABLE clock_parties (
    cluster TEXT NOT NULL, party TEXT NOT NULL, workflow_id TEXT NOT NULL, owner TEXT NOT NULL,
    parent TEXT, rank INTEGER NOT NULL, epoch TEXT NOT NULL, waiting INTEGER NOT NULL,
    target REAL, seen REAL NOT NULL, PRIMARY KEY (cluster, party));
"""

#: Version of the tables above. Bump it with every change to them and add the step from the
#: previous version to ``_MIGRATIONS``; a fleet file newer than this code is refused.
SCHEMA_VERSION = 4

MAX_SPEED = LOGICAL_CLOCK  # stored speed meaning "every fleet-time wait is zero"

#: A party of a logical clock that was given its turn and has not waited again for this long
#: (wall seconds) is taken for gone (its workflow crashed or ended without leaving) and dropped,
#: so it cannot hold its cluster's clock forever. Waiting parties never block a clock: one whose
#: workflow is gone is dropped when its turn comes and nobody can be told.
CLOCK_BUSY_TIMEOUT_SECONDS = 120.0

#: The fastest wall-clock factor a fleet may run at: 1e6 fleet seconds per wall second (11.6
#: fleet days). The fleet simulates every fleet hour that passes (about 3 ms per hour for a
#: 3,072-host cluster here), so a larger factor only makes every read spin catching up; a fleet
#: that should not wait at all runs at ``max`` (a logical clock) instead.
MAX_SPEED_FACTOR = 1e6
#: Seeds are stored as text and drawn from through ``str``; keep them to what SQLite and every
#: tool reading the fleet can hold.
MAX_SEED = 2**63 - 1


def parse_speed(value: str | float) -> float:
    """``max`` or a factor of fleet time over wall time in (0, 1e6]; errors name ``speed``."""
    if isinstance(value, str) and value.strip().lower() == "max":
        return MAX_SPEED
    if isinstance(value, bool):
        raise ValueError(f"speed: {value!r} is neither a number nor 'max'")
    try:
        speed = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"speed: {str(value)[:40]!r} is neither a number nor 'max'") from None
    if not 0 < speed <= MAX_SPEED_FACTOR:  # also nan and inf
        raise ValueError(
            f"speed: must be above 0 and at most {MAX_SPEED_FACTOR:g} fleet seconds per wall "
            "second (or 'max', a fleet that never waits)"
        )
    return speed


def check_seed(seed: object) -> int:
    """A seed is a whole number from 0 to 2**63-1; errors name ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError("seed: must be a whole number from 0 to 2**63-1")
    return seed


class FleetUnreadable(NoFleet):
    """The fleet file is there but is not a usable fleet: truncated, scribbled, a directory.

    A :class:`~orchestrator.errors.NoFleet` (permanent: retrying an activity cannot heal it);
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


def cluster_of(host: str) -> str:
    return host.split("-", 1)[0]


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=120000")
    return conn


class SqliteFleet:
    """A simulated GPU fleet in one SQLite file, shared by every process on the machine."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(f"no fleet at {path}: run `trainctl fleet init` first")
        if not path.is_file():
            raise FleetUnreadable(path, "not a regular file")
        self.path = path
        try:
            self.conn = _connect(path)
        except sqlite3.DatabaseError as err:
            if any(word in str(err) for word in _NOT_DAMAGE):
                raise
            raise FleetUnreadable(path, str(err)) from None
        try:
            _migrate(self.conn, path)
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

    def close(self) -> None:
        self.conn.close()

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
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            conn.executescript(SCHEMA)
            conn.execute("BEGIN")
            wall = wall or datetime.now(UTC)
            meta = {
                "seed": seed,
                "preset": preset.name,
                "speed": speed,
                "anchor_wall": wall.isoformat(),
                "schema_version": SCHEMA_VERSION,
            }
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()]
            )
            topo = Topology(preset)
            conn.executemany(
                "INSERT INTO switches VALUES (?, ?, ?, ?)",
                [(n, tier, c, INITIAL_SWITCH_FIRMWARE) for n, tier, c in topo.switches],
            )
            for cluster in preset.cluster_names():
                _save(conn, build_cluster(preset, seed, cluster, topo), new=True)
                conn.execute("INSERT INTO clocks VALUES (?, 0.0)", (cluster,))
            conn.execute("COMMIT")
            conn.close()
            os.replace(tmp, path)
            for suffix in ("-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
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
            row = self.conn.execute("SELECT now FROM clocks WHERE cluster=?", (cluster,)).fetchone()
            if row is None:
                raise UnknownCluster(f"cluster: unknown cluster {cluster!r}", field="cluster")
            return float(row[0])
        wall = wall or datetime.now(UTC)
        return max(0.0, (wall - self.anchor_wall).total_seconds() * self.speed / 3600.0)

    def advance_clock(self, cluster: str, target_hours: float) -> float:
        """Move ``cluster``'s logical clock forward to ``target_hours``; the cluster's hour."""
        with self._tx():
            now = self.fleet_time(cluster=cluster)
            if self.logical and target_hours > now:
                self._set_clock(cluster, target_hours)
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
            if children is not None:
                self._adopt(conn, cluster, party, children, seen)
            row = conn.execute(
                "SELECT epoch, waiting FROM clock_parties WHERE cluster=? AND party=?",
                (cluster, party.key),
            ).fetchone()
            if epoch and row is not None and row[0] == epoch:
                if not row[1]:  # released for this very wait: it is this party's turn
                    return ClockTurn(now=now, released=True)
                conn.execute(
                    "UPDATE clock_parties SET seen=? WHERE cluster=? AND party=?",
                    (seen, cluster, party.key),
                )
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO clock_parties VALUES (?,?,?,?,?,?,?,1,?,?)",
                    (
                        cluster,
                        party.key,
                        party.workflow_id,
                        party.owner,
                        party.parent,
                        party.rank,
                        epoch,
                        target_hours,
                        seen,
                    ),
                )
            for key in wakes:
                conn.execute(
                    "UPDATE clock_parties SET target=? WHERE cluster=? AND party=? AND waiting=1 "
                    "AND target > ?",
                    (now, cluster, key, now),
                )
            released = self._step(conn, cluster, now, seen)
        mine = any(r.party == party.key and r.epoch == epoch for r in released)
        now = max([now, *(r.now for r in released)])
        others = tuple(r for r in released if r.party != party.key)
        return ClockTurn(now=now, released=mine, others=others)

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
            if party is not None:
                conn.execute(
                    "DELETE FROM clock_parties WHERE cluster=? AND party=?", (cluster, party)
                )
            if owner is not None:
                conn.execute(
                    "DELETE FROM clock_parties WHERE cluster=? AND owner=?", (cluster, owner)
                )
            return tuple(self._step(conn, cluster, self.fleet_time(cluster=cluster), seen))

    def clock_parties(self, cluster: str) -> list[dict[str, Any]]:
        """The parties of ``cluster``'s logical clock, in turn order (for status and tests)."""
        cols = ("party", "workflow_id", "owner", "parent", "rank", "epoch", "waiting", "target")
        rows = self.conn.execute(
            f"SELECT {', '.join(cols)} FROM clock_parties WHERE cluster=? "
            "ORDER BY waiting, target IS NULL, target, rank, party",
            (cluster,),
        )
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def _set_clock(self, cluster: str, hours: float) -> None:
        self.conn.execute("UPDATE clocks SET now=? WHERE cluster=?", (hours, cluster))

    def _adopt(
        self,
        conn: sqlite3.Connection,
        cluster: str,
        parent: ClockMember,
        children: Sequence[str],
        seen: float,
    ) -> None:
        """``children`` are every party ``parent`` started that still runs: others leave, and
        missing ones join as acting (they hold the clock until they first wait)."""
        known = {
            r[0]
            for r in conn.execute(
                "SELECT party FROM clock_parties WHERE cluster=? AND parent=?",
                (cluster, parent.key),
            )
        }
        gone = known - set(children)
        conn.executemany(
            "DELETE FROM clock_parties WHERE cluster=? AND party=?",
            [(cluster, k) for k in sorted(gone)],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO clock_parties VALUES (?,?,?,?,?,0,'',0,NULL,?)",
            [(cluster, k, k, parent.owner, parent.key, seen) for k in children],
        )

    def _step(
        self, conn: sqlite3.Connection, cluster: str, now: float, seen: float
    ) -> list[ClockRelease]:
        """Give the next turn if nobody is acting: to the party waiting for the earliest instant
        (then the lower rank, then the name), moving the clock there. One turn at a time is how a
        discrete-event simulator orders simultaneous events, so outcomes do not depend on which
        worker thread ran first."""
        stale = seen - CLOCK_BUSY_TIMEOUT_SECONDS
        conn.execute(
            "DELETE FROM clock_parties WHERE cluster=? AND waiting=0 AND seen < ?",
            (cluster, stale),
        )
        acting = conn.execute(
            "SELECT 1 FROM clock_parties WHERE cluster=? AND waiting=0 LIMIT 1", (cluster,)
        ).fetchone()
        if acting is not None:
            return []
        row = conn.execute(
            "SELECT party, workflow_id, epoch, target FROM clock_parties "
            "WHERE cluster=? AND waiting=1 AND target IS NOT NULL "
            "ORDER BY target, rank, party LIMIT 1",
            (cluster,),
        ).fetchone()
        if row is None:
            return []
        key, workflow_id, epoch, target = row
        if target > now:
            now = float(target)
            self._set_clock(cluster, now)
        conn.execute(
            "UPDATE clock_parties SET waiting=0, seen=? WHERE cluster=? AND party=?",
            (seen, cluster, key),
        )
        return [ClockRelease(party=key, workflow_id=workflow_id, epoch=epoch, now=now)]

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
            sim = self._load(conn, name)
            sim.advance(self.fleet_time(wall, name))
            yield sim
            _save(conn, sim)

    def peek(self, name: str, wall: datetime | None = None) -> ClusterSim:
        """The cluster advanced to the caller's fleet time, without writing anything back."""
        self.conn.execute("BEGIN")
        try:
            sim = self._load(self.conn, name)
            sim.advance(self.fleet_time(wall, name))
        finally:
            self.conn.execute("ROLLBACK")
        return sim

    def _load(self, conn: sqlite3.Connection, name: str) -> ClusterSim:
        row = conn.execute("SELECT state FROM clusters WHERE name=?", (name,)).fetchone()
        if row is None:
            raise UnknownCluster(f"cluster: unknown cluster {name!r}", field="cluster")
        state = ClusterState(**json.loads(row[0]))
        hosts = [
            HostRec(
                r[0],
                r[2],
                r[3],
                r[4],
                json.loads(r[5]),
                r[6],
                r[7],
                r[8],
                r[9],
                r[10],
                r[11],
                bool(r[12]),
                r[13],
                r[14],
            )
            # By name (= topology order): INSERT OR REPLACE gives a saved row a new rowid, so
            # rowid order would depend on which transactions touched which hosts.
            for r in conn.execute("SELECT * FROM hosts WHERE cluster=? ORDER BY name", (name,))
        ]
        jobs = {
            r[1]: JobRec(
                r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8], r[9], r[10], r[11]
            )
            for r in conn.execute(
                "SELECT * FROM jobs WHERE cluster=? AND state!='done' ORDER BY id", (name,)
            )
        }
        sim = ClusterSim(
            name,
            self.seed,
            hosts,
            jobs,
            state,
            self.preset.max_job_hosts,
            self.preset.target_utilisation,
        )
        rows = conn.execute(
            "SELECT name, firmware FROM switches WHERE cluster=? AND tier='rack'", (name,)
        )
        sim.switches.update(dict(rows.fetchall()))
        return sim

    # ------------------------------------------------------------------ reads
    def cluster_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM clusters ORDER BY name")]

    def hosts_in(self, cluster: str) -> int:
        row = self.conn.execute("SELECT COUNT(*) FROM hosts WHERE cluster=?", (cluster,)).fetchone()
        return int(row[0])

    def failure_domains(self, cluster: str | None = None) -> dict[str, tuple[str, str]]:
        sql = "SELECT name, rack, zone FROM hosts"
        args: tuple[str, ...] = ()
        if cluster is not None:
            sql, args = sql + " WHERE cluster = ?", (cluster,)
        return {name: (rack, zone) for name, rack, zone in self.conn.execute(sql, args)}

    def records(
        self, since: int = 0, cluster: str | None = None
    ) -> Iterator[tuple[int, Event, str]]:
        """The backend interface's name for the event log (``events``)."""
        return self.events(since, cluster)

    def events(
        self, since: int = 0, cluster: str | None = None
    ) -> Iterator[tuple[int, Event, str]]:
        """The append-only event log in order: (seq, event, cluster)."""
        sql = "SELECT seq, t, cluster, actor, kind, host, detail FROM events WHERE seq > ?"
        args: list[Any] = [since]
        if cluster:
            sql += " AND cluster = ?"
            args.append(cluster)
        for seq, t, c, actor, kind, host, detail in self.conn.execute(sql + " ORDER BY seq", args):
            yield seq, Event(t, actor, kind, host, json.loads(detail)), c

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

    def get_meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())


def _schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return 1 if row is None else int(row[0])  # version 1 carried no number


def _stamp_v2(conn: sqlite3.Connection) -> None:
    """1 -> 2: the tables are unchanged; version 2 only starts numbering them."""
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '2')")


def _clocks_v3(conn: sqlite3.Connection) -> None:
    """2 -> 3: the one logical clock (meta ``logical_now``) becomes one per cluster, each
    starting where the fleet's clock stood, and the clocks' parties get their table."""
    row = conn.execute("SELECT value FROM meta WHERE key='logical_now'").fetchone()
    for statement in SCHEMA.split(";"):
        if "CREATE TABLE clock" in statement:
            conn.execute(statement)
    conn.execute(
        "INSERT INTO clocks SELECT name, ? FROM clusters", (float(row[0]) if row else 0.0,)
    )
    conn.execute("DELETE FROM meta WHERE key='logical_now'")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '3')")


def _boots_v4(conn: sqlite3.Connection) -> None:
    """3 -> 4: hosts remember when they last booted (a reboot operation changes each host once);
    hosts of an older file have no known boot."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(hosts)")}
    if "last_boot" not in columns:
        conn.execute("ALTER TABLE hosts ADD COLUMN last_boot REAL")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '4')")


#: version -> the step that takes a fleet file from that version to the next.
_MIGRATIONS = {1: _stamp_v2, 2: _clocks_v3, 3: _boots_v4}


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring an older fleet file up to ``SCHEMA_VERSION`` in one transaction, or refuse it."""
    version = _schema_version(conn)
    if version > SCHEMA_VERSION:
        raise FleetSchemaMismatch(
            f"fleet: {path} has schema version {version}, newer than this trainctl understands "
            f"({SCHEMA_VERSION}); upgrade trainctl, or run `trainctl fleet init` for a new fleet"
        )
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _schema_version(conn)  # another process may have migrated meanwhile
        while version < SCHEMA_VERSION:
            step = _MIGRATIONS.get(version)
            if step is None:
                raise FleetSchemaMismatch(
                    f"fleet: {path} has schema version {version}, which cannot be migrated; "
                    "run `trainctl fleet init` to build a new fleet"
                )
            step(conn)
            version += 1
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _save(conn: sqlite3.Connection, sim: ClusterSim, new: bool = False) -> None:
    s = sim.state
    conn.execute(
        "INSERT OR REPLACE INTO clusters VALUES (?, ?)",
        (
            sim.name,
            json.dumps(
                {
                    "now": s.now,
                    "job_seq": s.job_seq,
                    "fail_seq": s.fail_seq,
                    "next_failure_at": s.next_failure_at,
                    "queue": s.queue,
                    "targets": s.targets,
                    "faults": s.faults,
                    "job_behaviours": s.job_behaviours,
                    "piggyback": s.piggyback,
                    "job_refusals": s.job_refusals,
                    "reimage": s.reimage,
                }
            ),
        ),
    )
    names = sim.order if new else sorted(sim.dirty_hosts)
    conn.executemany(
        "INSERT OR REPLACE INTO hosts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                h.name,
                sim.name,
                h.zone,
                h.rack,
                str(h.state),
                json.dumps(h.versions),
                h.job_id,
                h.reason,
                h.owner,
                h.repair_until,
                h.defect,
                h.last_visit,
                int(h.verified),
                h.updates,
                h.last_boot,
            )
            for h in (sim.hosts[n] for n in names)
        ],
    )
    job_ids = list(sim.jobs) if new else sorted(sim.dirty_jobs)
    conn.executemany(
        "INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                sim.name,
                j.id,
                j.size,
                j.work_hours,
                j.ckpt_hours,
                j.submitted,
                json.dumps(j.hosts),
                j.start,
                j.driver,
                j.cuda,
                j.state,
                j.interruptions,
            )
            for j in (sim.jobs[i] for i in job_ids)
        ],
    )
    conn.executemany(
        "UPDATE switches SET firmware=? WHERE name=?",
        [(sim.switches[n], n) for n in sorted(sim.dirty_switches)],
    )
    sim.dirty_switches.clear()
    conn.executemany(
        "INSERT INTO events (t, cluster, actor, kind, host, detail) VALUES (?,?,?,?,?,?)",
        [(e.t, sim.name, e.actor, e.kind, e.host, json.dumps(e.detail)) for e in sim.events],
    )
    sim.events.clear()
    sim.dirty_hosts.clear()
    sim.dirty_jobs.clear()
