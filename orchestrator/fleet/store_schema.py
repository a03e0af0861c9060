"""The fleet store's tables, written once for SQLite and PostgreSQL, and the steps that bring an
older store up to them.

The tables are SQLAlchemy Core ``Table`` objects on one ``MetaData``: SQLAlchemy renders their
DDL for each database (``REAL`` on SQLite is ``FLOAT`` on PostgreSQL; the event log's ``seq`` is
SQLite's ``INTEGER PRIMARY KEY AUTOINCREMENT`` and PostgreSQL's ``BIGSERIAL``), and every query
of the store is built from them. A store outlives the trainctl that built it, so its layout is
versioned in the store itself (``meta.schema_version``): every change to the tables bumps
``SCHEMA_VERSION`` and adds the step from the previous version to ``_MIGRATIONS``. Opening a store
runs ``migrate``, which brings it up to date in one transaction or refuses it (a store newer
than this code is never touched: a rolling upgrade never writes an old shape into a new schema).

Why a version row and not Alembic's ``alembic_version``: every fleet file made since version 2
already carries its number in ``meta``, the refusal of a newer store is one comparison, and the
steps are a few lines of Core each, run inside the store's own transaction; Alembic's script
directory and environment would add a second record of the version to keep in step.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    event,
    inspect,
    select,
    text,
)

from orchestrator.contracts.constants import LEGACY_MAX_SPEED, MAX_SPEED_FACTOR
from orchestrator.contracts.errors import FleetSchemaMismatch, NoFleet

if TYPE_CHECKING:
    from orchestrator.fleet.store_db import Database

metadata = MetaData()


def _text(name: str, nullable: bool = False, **kw: object) -> Column[str]:
    return Column(name, Text, nullable=nullable, **kw)  # type: ignore[arg-type]


meta = Table("meta", metadata, _text("key", primary_key=True), _text("value"))
clusters = Table("clusters", metadata, _text("name", primary_key=True), _text("state"))
hosts = Table(
    "hosts",
    metadata,
    _text("name", primary_key=True),
    _text("cluster"),
    _text("zone"),
    _text("rack"),
    _text("state"),
    _text("versions"),
    Column("job_id", Integer),
    _text("reason"),
    _text("owner"),
    Column("repair_until", Float),
    _text("defect", nullable=True),
    Column("last_visit", Float),
    Column("verified", Integer, nullable=False),
    Column("updates", Integer, nullable=False),
    Column("last_boot", Float),
)
Index("hosts_cluster", hosts.c.cluster)
jobs = Table(
    "jobs",
    metadata,
    _text("cluster", primary_key=True),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("size", Integer, nullable=False),
    Column("work", Float, nullable=False),
    Column("ckpt", Float, nullable=False),
    Column("submitted", Float, nullable=False),
    _text("hosts"),
    Column("start", Float),
    _text("driver"),
    _text("cuda"),
    _text("state"),
    Column("interruptions", Integer, nullable=False),
)
Index("jobs_live", jobs.c.cluster, jobs.c.state)
switches = Table(
    "switches",
    metadata,
    _text("name", primary_key=True),
    _text("tier"),
    _text("cluster", nullable=True),
    _text("firmware"),
)
events = Table(
    "events",
    metadata,
    Column("seq", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True),
    Column("t", Float, nullable=False),
    _text("cluster"),
    _text("actor"),
    _text("kind"),
    _text("host", nullable=True),
    _text("detail"),
    sqlite_autoincrement=True,
)
#: The breakers' look at a cluster's latest failures (``breaker_store``) every few seconds: a
#: range of one cluster's recent events, not a scan of the whole log.
events_by_cluster_time = Index("events_cluster_t", events.c.cluster, events.c.t)
#: The circuit breakers' record, append-only: a ``trip`` (a cluster's breaker opened, why), a
#: ``paused`` per workflow it paused, a ``reset`` (who, why, what it resumed). A cluster's
#: breaker is open while its last ``trip`` has no ``reset`` after it (``breaker_store``).
breaker_log = Table(
    "breaker_log",
    metadata,
    Column("seq", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True),
    _text("cluster"),
    Column("wall", Float, nullable=False),
    _text("action"),
    _text("who"),
    _text("reason"),
    _text("detail"),
    sqlite_autoincrement=True,
)
#: One row per cluster: PostgreSQL's write lock on that cluster (``store_db.Database.tx`` takes
#: it ``FOR UPDATE`` first, so two workers acting on one cluster take turns).
cluster_locks = Table("cluster_locks", metadata, _text("cluster", primary_key=True))
#: The tables of versions 3 to 6 that version 7 drops (the per-cluster clocks of a fleet at
#: speed ``max``, and their parties): here only for the steps that make and drop them.
_legacy = MetaData()
_clocks = Table(
    "clocks", _legacy, _text("cluster", primary_key=True), Column("now", Float, nullable=False)
)
_clock_parties = Table(
    "clock_parties",
    _legacy,
    _text("cluster", primary_key=True),
    _text("party", primary_key=True),
    _text("workflow_id"),
    _text("owner"),
    _text("parent", nullable=True),
    Column("rank", Integer, nullable=False),
    _text("epoch"),
    Column("waiting", Integer, nullable=False),
    Column("target", Float),
    Column("seen", Float, nullable=False),
)
workers = Table(
    "workers",
    metadata,
    _text("id", primary_key=True),
    _text("host"),
    Column("pid", Integer, nullable=False),
    _text("fleet"),
    Column("started", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
)
#: One row per cluster, a number every write to that cluster's rows raises (triggers on the
#: tables below, so a write from any process or tool counts, even SQL typed by hand). A worker
#: keeps the cluster it last saved in memory and reuses it while the number is the one its own
#: save left (``sqlite_fleet``): loading 3,072 host rows was half its work per activity.
generations = Table(
    "generations",
    metadata,
    _text("cluster", primary_key=True),
    Column("n", BigInteger, nullable=False),
)
#: table -> its column naming the cluster, for the generation triggers
_GENERATION_SOURCES = {
    "clusters": "name",
    "hosts": "cluster",
    "jobs": "cluster",
    "switches": "cluster",
}
_PG_BUMP = """
CREATE OR REPLACE FUNCTION trainctl_bump_generation() RETURNS trigger AS $$
DECLARE c text;
BEGIN
  IF TG_OP = 'DELETE' THEN c := to_jsonb(OLD) ->> TG_ARGV[0];
  ELSE c := to_jsonb(NEW) ->> TG_ARGV[0]; END IF;
  INSERT INTO generations (cluster, n) VALUES (c, 1)
    ON CONFLICT (cluster) DO UPDATE SET n = generations.n + 1;
  RETURN NULL;
END $$ LANGUAGE plpgsql
"""


def _generation_ddl(dialect: str) -> list[str]:
    """The statements that make every write to a cluster's rows raise its generation."""
    if dialect == "postgresql":
        out = [_PG_BUMP]
        for table, col in _GENERATION_SOURCES.items():
            out.append(f"DROP TRIGGER IF EXISTS {table}_generation ON {table}")
            out.append(
                f"CREATE TRIGGER {table}_generation AFTER INSERT OR UPDATE OR DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION trainctl_bump_generation('{col}')"
            )
        return out
    out = []
    for table, col in _GENERATION_SOURCES.items():
        for op, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
            out.append(
                f"CREATE TRIGGER IF NOT EXISTS {table}_generation_{op.lower()} AFTER {op} "
                f"ON {table} BEGIN INSERT INTO generations (cluster, n) VALUES ({row}.{col}, 1) "
                "ON CONFLICT (cluster) DO UPDATE SET n = n + 1; END"
            )
    return out


def _create_generation_triggers(_target: object, conn: Connection, **_kw: object) -> None:
    for stmt in _generation_ddl(conn.dialect.name):
        conn.exec_driver_sql(stmt)


# A new store gets them once all its tables exist (``metadata.create_all``).
event.listen(metadata, "after_create", _create_generation_triggers)

#: Version of the tables above. Bump it with every change to them and add the step from the
#: previous version to ``_MIGRATIONS``; a store newer than this code is refused.
SCHEMA_VERSION = 8

_VERSION = select(meta.c.value).where(meta.c.key == "schema_version")


class DamagedRecord(NoFleet):
    """A store whose ``schema_version`` cannot be true (not a number, or older than the tables
    it holds): migrating it would fail half way or lose rows, so it is refused untouched
    (exit 1, field ``fleet``), saying how to restore it."""

    def __init__(self, where: str, why: str, version: int = SCHEMA_VERSION) -> None:
        super().__init__(
            f"fleet: the record at {where} is damaged ({why}), left as it is: restore it "
            "from a backup (a fleet.db.*.bak copy, a pg_dump, a `trainctl fleet migrate --to` "
            f"copy) or, if only that row changed, set meta's schema_version back to "
            f"'{version}' (`trainctl fleet init --force` starts a new fleet without it)",
            field="fleet",
        )


def _number(row: Any) -> int | None:
    """The version in the ``schema_version`` row ``row`` (None: no row, a file of before the
    numbering, version 1), or None when it holds no version number."""
    if row is None:
        return 1  # version 1 carried no number
    value = str(row[0]).strip()
    return int(value) if value.isdigit() and int(value) >= 1 else None


def _not_a_number(conn: Connection, row: Any, where: str) -> DamagedRecord:
    return DamagedRecord(
        where, f"its schema_version is {str(row[0])[:40]!r}, not a version", tables_version(conn)
    )


def schema_version(conn: Connection, lock: bool = False, where: str = "this store") -> int:
    """The store's schema version (1 for a file of before the numbering); ``lock`` holds the
    row until the transaction ends (PostgreSQL: two migrating workers take turns)."""
    row = conn.execute(_VERSION.with_for_update() if lock else _VERSION).first()
    version = _number(row)
    if version is None:
        raise _not_a_number(conn, row, where)
    return version


def _set_version(conn: Connection, version: int) -> None:
    conn.execute(meta.delete().where(meta.c.key == "schema_version"))
    conn.execute(meta.insert().values(key="schema_version", value=str(version)))


def _stamp_v2(conn: Connection) -> None:
    """1 -> 2: the tables are unchanged; version 2 only starts numbering them."""
    _set_version(conn, 2)


def _clocks_v3(conn: Connection) -> None:
    """2 -> 3: the one logical clock (meta ``logical_now``) becomes one per cluster, each
    starting where the fleet's clock stood, and the clocks' parties get their table."""
    row = conn.execute(select(meta.c.value).where(meta.c.key == "logical_now")).first()
    _clocks.create(conn, checkfirst=True)
    _clock_parties.create(conn, checkfirst=True)
    now = float(row[0]) if row else 0.0
    names = [r[0] for r in conn.execute(select(clusters.c.name))]
    if names:
        conn.execute(_clocks.insert(), [{"cluster": n, "now": now} for n in names])
    conn.execute(meta.delete().where(meta.c.key == "logical_now"))
    _set_version(conn, 3)


def _boots_v4(conn: Connection) -> None:
    """3 -> 4: hosts remember when they last booted (a reboot operation changes each host once);
    hosts of an older file have no known boot."""
    if "last_boot" not in {c["name"] for c in inspect(conn).get_columns("hosts")}:
        kind = hosts.c.last_boot.type.compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE hosts ADD COLUMN last_boot {kind}"))
    _set_version(conn, 4)


def _workers_v5(conn: Connection) -> None:
    """4 -> 5: the workers using the store record a heartbeat there (``fleet.heartbeats``), so a
    destructive command can tell whether one is alive; an older store has none yet."""
    workers.create(conn, checkfirst=True)
    _set_version(conn, 5)


def _generations_v6(conn: Connection) -> None:
    """5 -> 6: every write to a cluster's rows raises its number in ``generations`` (triggers),
    by which a worker knows the cluster it keeps in memory is still the stored one."""
    generations.create(conn, checkfirst=True)
    _create_generation_triggers(generations, conn)
    _set_version(conn, 6)


def _locks_v7(conn: Connection) -> None:
    """6 -> 7: fleet time always follows wall time at the fleet's speed. A fleet built at speed
    ``max`` (stored as 0: one logical clock per cluster) runs at ``MAX_SPEED_FACTOR`` from the
    hour its furthest cluster reached, so no cluster goes back in time; the clocks' parties go,
    and each cluster's clock row becomes its write lock (``cluster_locks``)."""
    cluster_locks.create(conn, checkfirst=True)
    names = [r[0] for r in conn.execute(select(clusters.c.name))]
    reached = 0.0
    if inspect(conn).has_table("clocks"):
        reached = max((float(r[0]) for r in conn.execute(select(_clocks.c.now))), default=0.0)
    if names:
        have = {r[0] for r in conn.execute(select(cluster_locks.c.cluster))}
        rows = [{"cluster": n} for n in names if n not in have]
        if rows:
            conn.execute(cluster_locks.insert(), rows)
    speed = conn.execute(select(meta.c.value).where(meta.c.key == "speed")).first()
    if speed is not None and float(speed[0]) == LEGACY_MAX_SPEED:
        anchor = datetime.now(UTC) - timedelta(seconds=reached * 3600.0 / MAX_SPEED_FACTOR)
        for key, value in (("speed", str(MAX_SPEED_FACTOR)), ("anchor_wall", anchor.isoformat())):
            conn.execute(meta.update().where(meta.c.key == key).values(value=value))
    _clock_parties.drop(conn, checkfirst=True)
    _clocks.drop(conn, checkfirst=True)
    _set_version(conn, 7)


def _breakers_v8(conn: Connection) -> None:
    """7 -> 8: the circuit breakers keep their record (``breaker_log``; an older store has
    none, so every breaker is closed) and read a cluster's recent events by index."""
    breaker_log.create(conn, checkfirst=True)
    events_by_cluster_time.create(conn, checkfirst=True)
    _set_version(conn, 8)


#: version -> the step that takes a store from that version to the next.
_MIGRATIONS = {
    1: _stamp_v2,
    2: _clocks_v3,
    3: _boots_v4,
    4: _workers_v5,
    5: _generations_v6,
    6: _locks_v7,
    7: _breakers_v8,
}


def refuse_newer(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise FleetSchemaMismatch(
            f"fleet: {where} has schema version {version}, newer than this trainctl understands "
            f"({SCHEMA_VERSION}); upgrade trainctl, or run `trainctl fleet init` for a new fleet"
        )


def stored_version(db: Database) -> int:
    """The schema version of the store ``db`` (read outside any transaction)."""
    rows = db.read(_VERSION)
    version = _number(rows[0] if rows else None)
    if version is None:
        with db.snapshot() as conn:
            raise _not_a_number(conn, rows[0], db.where)
    return version


def tables_version(conn: Connection) -> int:
    """The schema version the store's tables are at, whatever its ``schema_version`` row says
    (versions 1 and 2 have the same tables: 2, whose step only numbers them)."""
    names = set(inspect(conn).get_table_names())
    for table, version in (
        ("breaker_log", 8),
        ("cluster_locks", 7),
        ("generations", 6),
        ("workers", 5),
    ):
        if table in names:
            return version
    if "clocks" not in names:
        return 2
    has_boot = "hosts" in names and any(
        c["name"] == "last_boot" for c in inspect(conn).get_columns("hosts")
    )
    return 4 if has_boot else 3


def _check_claim(conn: Connection, version: int, where: str) -> None:
    """DamagedRecord when a store says it predates the clocks (version 1 or 2, or no number)
    yet holds them: the step to 3 would add every cluster's clock a second time. (The later
    steps only add what is missing, so a store claiming 3 to 5 with newer tables heals.)"""
    tables = inspect(conn)
    if version >= 3 or not (tables.has_table("clocks") or tables.has_table("cluster_locks")):
        return
    said = f"says {version}" if conn.execute(_VERSION).first() else "is missing"
    actual = tables_version(conn)
    raise DamagedRecord(
        where, f"its schema_version {said} but its tables are those of version {actual}", actual
    )


def migrate(db: Database, where: str) -> None:
    """Bring an older store up to ``SCHEMA_VERSION`` in one transaction, or refuse it; a
    current store is only read."""
    version = stored_version(db)
    refuse_newer(version, where)
    if version < SCHEMA_VERSION:
        with db.tx() as conn:
            upgrade(conn, where)


def upgrade(conn: Connection, where: str) -> None:
    """Run the steps from the store's version to ``SCHEMA_VERSION`` inside the caller's write
    transaction (which holds the store's lock), or refuse."""
    version = schema_version(conn, lock=True, where=where)  # another may have migrated
    refuse_newer(version, where)
    _check_claim(conn, version, where)
    while version < SCHEMA_VERSION:
        step = _MIGRATIONS.get(version)
        if step is None:
            raise FleetSchemaMismatch(
                f"fleet: {where} has schema version {version}, which cannot be migrated; "
                "run `trainctl fleet init` to build a new fleet"
            )
        step(conn)
        version += 1


__all__ = [
    "SCHEMA_VERSION",
    "DamagedRecord",
    "breaker_log",
    "cluster_locks",
    "clusters",
    "events",
    "generations",
    "hosts",
    "jobs",
    "meta",
    "metadata",
    "migrate",
    "schema_version",
    "stored_version",
    "tables_version",
    "switches",
    "upgrade",
    "workers",
]
