"""The simulated fleet's tables on disk, and the steps that bring an older fleet file up to them.

A fleet file outlives the trainctl that built it, so its layout is versioned: every change to
``SCHEMA`` bumps ``SCHEMA_VERSION`` and adds the step from the previous version to
``_MIGRATIONS``. Opening a file runs ``migrate``, which either brings it up to date in one
transaction or refuses it with the reason (a file newer than this code is never touched).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.contracts.errors import FleetSchemaMismatch

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
CREATE TABLE workers (
    id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, fleet TEXT NOT NULL,
    started REAL NOT NULL, last_seen REAL NOT NULL);
"""

#: Version of the tables above. Bump it with every change to them and add the step from the
#: previous version to ``_MIGRATIONS``; a fleet file newer than this code is refused.
SCHEMA_VERSION = 5


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


def _workers_v5(conn: sqlite3.Connection) -> None:
    """4 -> 5: the workers using the file record a heartbeat there (``fleet.heartbeats``), so a
    destructive command can tell whether one is alive; an older file has none yet."""
    for statement in SCHEMA.split(";"):
        if "CREATE TABLE workers" in statement:
            conn.execute(statement.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '5')")


#: version -> the step that takes a fleet file from that version to the next.
_MIGRATIONS = {1: _stamp_v2, 2: _clocks_v3, 3: _boots_v4, 4: _workers_v5}


def migrate(conn: sqlite3.Connection, path: Path) -> None:
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
