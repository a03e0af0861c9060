"""One connection to a fleet store, SQLite or PostgreSQL, and the transactions every store runs.

Every query of the store is SQLAlchemy Core over the tables of ``store_schema``; this module is
where the two databases differ, and only in how a transaction takes its lock:

- **SQLite** (the embedded default): the connection is the driver's own (``ledger_files``
  opens it: WAL, long busy waits, read-only and immutable modes), handed to SQLAlchemy as is.
  A write transaction is ``BEGIN IMMEDIATE``: SQLite's one write lock serialises every process
  on the machine, as before; reads run outside a transaction, as the driver does. A driver
  error comes out as the driver raised it (``sqlite3.OperationalError`` and the like), so every
  caller that reads them sees what it always saw.
- **PostgreSQL** (workers on many machines sharing one record): a write transaction on a
  cluster first takes that cluster's row in ``cluster_locks`` ``FOR UPDATE``, so two workers
  acting on one cluster take turns and the budget check and the owner rule are each decided
  on rows nobody else is changing (READ COMMITTED, row locks: no serialisation
  failures to retry). A lost connection, a deadlock or a database that is not there yet is a
  ``StoreUnavailable``, a ``TemporaryError``: the transaction rolled back whole, the activity
  retries and the next use reconnects. A refusal of the role (a failed login, a missing
  privilege, a read-only database) is a ``StoreDenied``, temporary too, said from its SQLSTATE
  without the statement: callers and the CLI see field ``store``, never SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, inspect, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.pool import StaticPool

from orchestrator.contracts.errors import TemporaryError
from orchestrator.fleet import store_schema as t


class StoreUnavailable(TemporaryError):
    """The store did not answer (connection lost or refused, a deadlock): nothing of the
    transaction was written; retrying may succeed."""


class StoreDenied(TemporaryError):
    """The store answered and refused this role: authentication failed, a privilege is
    missing, or the database only takes read-only transactions. Nothing was written. The fix
    is an operator's (a password, a GRANT, the primary instead of a standby), which a worker
    retrying picks up without a restart: temporary, like a store that did not answer."""


#: PostgreSQL error codes that mean "try again": serialisation failure, deadlock.
_RETRY_CODES = {"40001", "40P01"}
#: SQLSTATE of a missing privilege, and of a write in a read-only transaction.
_NO_PRIVILEGE, _READ_ONLY = "42501", "25006"


class Database:
    """A store's engine and its one connection (a backend is used by one thread at a time)."""

    def __init__(self, engine: Engine, where: str) -> None:
        self.engine = engine
        self.where = where  # a path or a URL without secrets: what messages name
        self.dialect = engine.dialect.name
        self.is_sqlite = self.dialect == "sqlite"
        self._conn: Connection | None = None
        #: Inside ``tx`` or ``snapshot``: a read or a nested transaction joins it, as a
        #: statement on the store's one connection always did.
        self._open = False

    @classmethod
    def sqlite(cls, raw: sqlite3.Connection, where: str) -> Database:
        """The store in the SQLite file ``raw`` is open on (the driver's connection, kept)."""
        engine = create_engine("sqlite+pysqlite://", creator=lambda: raw, poolclass=StaticPool)
        return cls(engine, where)

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            try:
                self._conn = self.engine.connect()
            except sa_exc.DBAPIError as err:
                raise self._translate(err) from None
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with suppress(Exception):
                self._conn.close()
            self._conn = None
        self.engine.dispose()

    def require_fleet(self) -> None:
        """FileNotFoundError, as for a missing fleet file, when the store holds no fleet (a
        new, empty PostgreSQL database)."""
        try:
            found = inspect(self.conn).has_table("meta")
            self.conn.rollback()
        except sa_exc.DBAPIError as err:
            self._rollback(err)
            raise self._translate(err) from None
        if not found:
            raise FileNotFoundError(
                f"no fleet at {self.where}: run `trainctl fleet init --store {self.where}` first"
            )

    @property
    def in_transaction(self) -> bool:
        """A ``tx`` or ``snapshot`` of this store object is open (a new one would be nested)."""
        return self._open

    # --------------------------------------------------------------- transactions
    @contextmanager
    def tx(self, cluster: str | None = None) -> Iterator[Connection]:
        """One write transaction, committed on a clean exit; ``cluster``: the cluster whose row
        it locks first (PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already locks the file)."""
        if self._open:  # nested: part of the transaction already open
            yield self.conn
            return
        conn = self._fresh()
        self._open = True
        try:
            if self.is_sqlite:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif cluster is not None:
                locks = t.cluster_locks
                conn.execute(
                    select(locks.c.cluster).where(locks.c.cluster == cluster).with_for_update()
                )
            yield conn
            conn.commit()
        except BaseException as err:
            self._rollback(err)
            if isinstance(err, sa_exc.DBAPIError):
                raise self._translate(err) from None
            raise
        finally:
            self._open = False

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """Reads that must see one state (a ``peek``, a copy), never written back: SQLite's
        deferred transaction; on PostgreSQL REPEATABLE READ (one snapshot for every read)."""
        if self._open:
            yield self.conn
            return
        conn = self._fresh()
        self._open = True
        try:
            if self.is_sqlite:
                conn.exec_driver_sql("BEGIN")
            else:
                conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn
        except sa_exc.DBAPIError as err:
            self._rollback(err)
            raise self._translate(err) from None
        finally:
            self._open = False
            with suppress(Exception):
                conn.rollback()

    def read(self, stmt: Any, params: Any = None) -> list[Any]:
        """The rows of one read (outside any transaction on SQLite, a short one on PostgreSQL;
        inside the open transaction when there is one)."""
        if self._open:
            return list(self.conn.execute(stmt, params).all())
        conn = self._fresh()
        try:
            rows = list(conn.execute(stmt, params).all())
            if not self.is_sqlite:
                conn.rollback()
            return rows
        except sa_exc.DBAPIError as err:
            self._rollback(err)
            raise self._translate(err) from None

    def _fresh(self) -> Connection:
        conn = self.conn
        if conn.in_transaction():  # a read's implicit transaction (a no-op on SQLite)
            conn.rollback()
        return conn

    def _rollback(self, err: BaseException) -> None:
        if self._conn is None:
            return
        try:
            self._conn.rollback()
        except Exception:  # the connection is gone: the next use opens another
            with suppress(Exception):
                self._conn.invalidate()
                self._conn.close()
            self._conn = None

    def _translate(self, err: sa_exc.DBAPIError) -> BaseException:
        """A driver error as callers know it: SQLite's own; PostgreSQL's refusal of this role
        as ``StoreDenied``, its lost connection, refusal or deadlock as ``StoreUnavailable``
        (both temporary); anything else as raised."""
        orig = err.orig
        if self.is_sqlite and isinstance(orig, BaseException):
            return orig
        denied = _store_denied(err, self.where, self.engine.url.username)
        if denied is not None:
            return denied
        code = getattr(orig, "sqlstate", None)
        if (
            err.connection_invalidated
            or isinstance(err, sa_exc.OperationalError | sa_exc.InterfaceError)
            or code in _RETRY_CODES
        ):
            why = " ".join(str(orig).split())[:300]
            if self._conn is not None and err.connection_invalidated:
                self._conn = None
            return StoreUnavailable(f"store: {self.where} did not answer ({why})", field="store")
        return err


# ------------------------------------------------------------------ refusals
#: What trainctl's role needs, said with every missing privilege.
_NEEDS = (
    "trainctl needs CREATE on the schema to build a fleet, and SELECT, INSERT, UPDATE and "
    "DELETE on its tables and USAGE on its sequences to run one"
)
_PASSWORD_HINT = "check the password in PGPASSWORD, ~/.pgpass or PGPASSFILE"


def _store_denied(err: sa_exc.DBAPIError, where: str, user: str | None) -> StoreDenied | None:
    """``StoreDenied`` for a PostgreSQL error that refuses this role, named by SQLSTATE (a
    refused login has none: libpq reports it as text), said without the statement; else None."""
    orig = err.orig
    code = getattr(orig, "sqlstate", None)
    diag = getattr(orig, "diag", None)
    primary = " ".join(str(getattr(diag, "message_primary", None) or orig).split())[:300]
    role = f"the role {user!r}" if user else "this role"
    if code == _NO_PRIVILEGE:
        privilege = _privilege_of(err.statement or "")
        return StoreDenied(
            f"store: {role} lacks {privilege} at {where} ({primary}); {_NEEDS}",
            field="store",
        )
    if code == _READ_ONLY:
        return StoreDenied(
            f"store: {where} only allows reads ({primary}); trainctl needs write access: "
            "the primary server, not a standby, with default_transaction_read_only off",
            field="store",
        )
    if code is None and isinstance(err, sa_exc.OperationalError) and _login_refused(primary):
        return StoreDenied(
            f"store: authentication failed for {role} at {where} ({primary}); {_PASSWORD_HINT}",
            field="store",
        )
    return None


def _login_refused(text: str) -> bool:
    """libpq's text for a login the server refused (wrong or no password, no pg_hba entry)."""
    return any(
        words in text
        for words in ("authentication failed", "no password supplied", "no pg_hba.conf entry")
    )


def _privilege_of(statement: str) -> str:
    """What a refused statement needed, from its first words (never the statement itself)."""
    words = statement.split()
    verb = words[0].upper() if words else ""
    upper = statement.upper()
    if verb in ("ALTER", "DROP"):
        return "ownership of the tables"
    if verb == "LOCK" or "FOR UPDATE" in upper:
        verb = "UPDATE"
    elif verb == "INSERT" and "DO UPDATE" in upper:
        verb = "INSERT and UPDATE"
    elif verb not in ("CREATE", "INSERT", "UPDATE", "DELETE", "SELECT", "TRUNCATE"):
        return "a privilege it needs"
    return f"the {verb} privilege"


# ------------------------------------------------------------------ statements
_COMPILED: dict[Any, tuple[str, tuple[str, ...], dict[str, Any]]] = {}


def fetch(conn: Connection, stmt: Any, params: dict[str, Any]) -> Sequence[Any]:
    """Every row of ``stmt`` (a SELECT built from the tables): the fast path of a cluster's
    load. On SQLite the statement, compiled once by SQLAlchemy's SQLite dialect, runs on the
    driver's cursor (SQLAlchemy's result machinery costs more than SQLite's own work here);
    elsewhere through SQLAlchemy."""
    if conn.dialect.name != "sqlite":
        return conn.execute(stmt, params).all()
    found = _COMPILED.get(stmt)
    if found is None:
        compiled = stmt.compile(dialect=conn.dialect)
        found = (str(compiled), tuple(compiled.positiontup or ()), dict(compiled.params))
        _COMPILED[stmt] = found
    sql, order, defaults = found
    raw = conn.connection.driver_connection
    assert raw is not None
    return raw.execute(sql, [params[k] if k in params else defaults[k] for k in order]).fetchall()


_UPSERTS: dict[tuple[str, str, str], Any] = {}


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` into ``table``, each replacing the row of its primary key (SQLite's and
    PostgreSQL's ``INSERT ... ON CONFLICT DO UPDATE``, from SQLAlchemy's dialect modules)."""
    if rows:
        conn.execute(_conflict(conn, table, "update"), list(rows))


def insert_missing(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert the ``rows`` whose primary key ``table`` does not hold yet."""
    if rows:
        conn.execute(_conflict(conn, table, "nothing"), list(rows))


def _conflict(conn: Connection, table: Table, action: str) -> Any:
    key = (conn.dialect.name, table.name, action)
    stmt = _UPSERTS.get(key)
    if stmt is None:
        insert = (pg_dialect if key[0] == "postgresql" else sqlite_dialect).insert
        base = insert(table)
        pk = [c.name for c in table.primary_key.columns]
        if action == "nothing":
            stmt = base.on_conflict_do_nothing(index_elements=pk)
        else:
            rest = {c.name: base.excluded[c.name] for c in table.columns if c.name not in pk}
            stmt = base.on_conflict_do_update(index_elements=pk, set_=rest)
        _UPSERTS[key] = stmt
    return stmt


def continue_sequences(conn: Connection) -> None:
    """After rows were copied in with their ``seq``: PostgreSQL's sequences of the event log
    and the breakers' log go on after their last rows (SQLite's AUTOINCREMENT follows the rows
    by itself)."""
    if conn.dialect.name == "postgresql":
        for table in ("events", "breaker_log"):
            conn.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
                    f"COALESCE((SELECT MAX(seq) FROM {table}), 0) + 1, false)"
                )
            )


def lock_appends(conn: Connection) -> None:
    """PostgreSQL: appends to the event log take turns until commit, so ``seq`` order is commit
    order and a reader following the log by ``seq`` never skips an entry that commits later.
    (SQLite's write lock already orders every transaction.)"""
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE"))


__all__ = [
    "Database",
    "StoreDenied",
    "StoreUnavailable",
    "continue_sequences",
    "fetch",
    "insert_missing",
    "lock_appends",
    "upsert",
]
