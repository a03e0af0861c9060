"""Store and path errors naming their field: a store URL, a password or a privilege the store
refuses, four ``fleet init`` racing on one database, a damaged ``schema_version``, a bad
``fleet migrate --to``, a plot format matplotlib cannot write and a 5,000-character
``request_id``. Each is one line with the wanted exit code and field (one JSON object under
``--json``), no traceback, no SQL, and the record left as it was. PostgreSQL is the session's
real cluster (``pg_helpers``), its roles made with SQL there; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from orchestrator.app.cli import main
from orchestrator.app.cli.common import CliError, cli_error
from orchestrator.fleet import SqliteFleet, open_backend
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.store_schema import SCHEMA_VERSION
from orchestrator.fleet.store_url import STORE_ENV
from tests.pg_helpers import PASSWORD, PgServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: What a SQLAlchemy or psycopg error quoted whole would show.
SQL_TRACES = ("[SQL:", "ProgrammingError", "InternalError", "IntegrityError", "CREATE TABLE")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--json"])


def refused(result: Result, code: int, field: str) -> str:
    """``result`` is one JSON error object with ``code`` and ``field``, one line, no traceback
    and no SQL; its message."""
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    err = json.loads(lines[0])
    assert err["exit_code"] == code and err["field"] == field, err
    assert "Traceback" not in result.output and "internal error" not in err["error"], err
    assert not any(trace in result.output for trace in SQL_TRACES), err
    return str(err["error"])


def small_fleet(where: Path | str) -> None:
    SqliteFleet.create(where, get_preset("small"), 1, 3600.0).close()


def record_of(where: Path | str) -> tuple[Any, ...]:
    """What a fleet's record holds (its id, events, bad versions, hosts' states), read through
    the backend as its owner."""
    fleet = open_backend(where)
    try:
        states = [h.state for c in fleet.cluster_names() for h in fleet.peek(c).snapshot().hosts]
        events = [(e.kind, e.host) for _, e, _ in fleet.records()]
        return fleet.get_meta()["fleet_id"], events, fleet.bad_versions(True), states
    finally:
        fleet.close()


def db_name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def role_url(pg_server: PgServer, url: str, grants: str) -> str:
    """``url`` for a new login role (the tests' password) given ``grants`` on that database."""
    role = f"r_{uuid.uuid4().hex[:10]}"
    pg_server.psql(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    pg_server.psql(
        f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; {grants.format(role=role)}", db_name(url)
    )
    return url.replace("postgres@", f"{role}@")


# ------------------------------------------------------------------------------ the store
def test_a_store_url_with_port_99999_is_bad_input_naming_store(tmp_home: Path, monkeypatch):
    """A store URL whose port is no TCP port is refused with exit 2 naming ``store`` and the
    port, by ``fleet init --store`` and from TRAINCTL_STORE, before connecting or writing."""
    url = "postgresql://postgres@127.0.0.1:99999/fleet"
    assert "port 99999" in refused(
        run("fleet", "init", "--preset", "small", "--store", url), 2, "store"
    )
    monkeypatch.setenv(STORE_ENV, url)
    assert "port 99999" in refused(run("fleet", "status"), 2, "store")
    assert list(tmp_home.iterdir()) == []


def test_a_wrong_store_password_says_authentication_failed(
    tmp_home: Path, pg_store: str, monkeypatch: pytest.MonkeyPatch
):
    """A wrong password in PGPASSWORD: exit 1 naming ``store``, saying authentication failed
    (not that the server did not answer), the password nowhere, the record unchanged."""
    small_fleet(pg_store)
    before = record_of(pg_store)
    monkeypatch.setenv(STORE_ENV, pg_store)
    monkeypatch.setenv("PGPASSWORD", "not-the-Passw0rd")
    for args in (("fleet", "status"), ("versions", "mark", "os=6.1-bad", "--reason", "x")):
        result = run(*args)
        message = refused(result, 1, "store")
        assert "authentication failed" in message and "did not answer" not in message, message
        assert "not-the-Passw0rd" not in result.output
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert record_of(pg_store) == before


def test_a_role_without_create_at_fleet_init_names_the_privilege(
    tmp_home: Path, pg_server: PgServer, pg_store: str
):
    """``fleet init`` as a role that may not create tables: exit 1 naming ``store`` and the
    CREATE privilege, no SQL, and the database still holds no table."""
    url = role_url(pg_server, pg_store, "SELECT 1")  # connects (PUBLIC may), creates nothing
    message = refused(run("fleet", "init", "--preset", "small", "--store", url), 1, "store")
    assert "CREATE privilege" in message, message
    tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
    assert pg_server.psql(tables, db_name(pg_store)).strip() == "0"
    assert not (tmp_home / "store").exists()


def test_a_read_only_role_names_the_privilege_and_changes_nothing(
    tmp_home: Path, pg_server: PgServer, pg_store: str, monkeypatch: pytest.MonkeyPatch
):
    """A role that may only read, at ``fleet inject-fault`` and ``versions mark``: exit 1
    naming ``store`` and the UPDATE privilege, no SQL, and the record unchanged."""
    small_fleet(pg_store)
    before = record_of(pg_store)
    url = role_url(pg_server, pg_store, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    monkeypatch.setenv(STORE_ENV, url)
    for args in (
        ("fleet", "inject-fault", "--cluster", "c00", "--component", "os", "--version", "9.9"),
        ("versions", "mark", "os=6.1-bad", "--reason", "boot loop"),
    ):
        message = refused(run(*args), 1, "store")
        assert "UPDATE privilege" in message, message
    assert record_of(pg_store) == before


def test_fleet_init_force_on_a_read_only_database_says_so_and_keeps_the_fleet(
    tmp_home: Path, pg_server: PgServer, pg_store: str
):
    """``fleet init --force`` on a database that only takes read-only transactions: exit 1
    naming ``store``, saying write access is missing, no SQL, and the old fleet kept whole."""
    small_fleet(pg_store)
    before = record_of(pg_store)
    name = db_name(pg_store)
    pg_server.psql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    try:
        result = run("fleet", "init", "--preset", "small", "--store", pg_store, "--force")
        message = refused(result, 1, "store")
        assert "write access" in message and "read" in message, message
    finally:
        pg_server.psql(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    assert record_of(pg_store) == before


def test_four_fleet_inits_at_once_one_wins_the_rest_name_force(tmp_home: Path, pg_store: str):
    """Four ``fleet init`` at once on one empty database (the command itself, each in its own
    thread with its own connections): one builds the fleet, the other three exit 2 naming
    ``force``, and the fleet built is whole."""
    start = threading.Barrier(4)

    def init() -> CliError | None:
        start.wait()
        try:
            main(["fleet", "init", "--preset", "small", "--store", pg_store], standalone_mode=False)
        except Exception as err:  # noqa: BLE001 - what the contract makes of it is the outcome
            return cli_error(err)
        return None

    with ThreadPoolExecutor(4) as pool, contextlib.redirect_stdout(io.StringIO()):
        outcomes = list(pool.map(lambda _: init(), range(4)))
    refusals = [err for err in outcomes if err is not None]
    assert len(refusals) == 3, outcomes
    for err in refusals:
        assert err.exit_code == 2 and err.field == "force", err.as_json()
        assert "--force" in err.message and "SQL" not in err.message, err.as_json()
    _, _, _, states = record_of(pg_store)
    assert len(states) == 128


# ------------------------------------------------------------------------- the record
DAMAGE = {
    "set to 1": "UPDATE meta SET value='1' WHERE key='schema_version'",
    "deleted": "DELETE FROM meta WHERE key='schema_version'",
    "abc": "UPDATE meta SET value='abc' WHERE key='schema_version'",
}


def _sql(where: Path | str, pg_server: PgServer | None, sql: str) -> str:
    """``sql`` run on the store ``where`` as its owner, straight (no trainctl); its output."""
    if pg_server is not None:
        return pg_server.psql(sql, db_name(str(where))).strip()
    conn = sqlite3.connect(where, isolation_level=None)
    try:
        return "\n".join("|".join(map(str, r)) for r in conn.execute(sql).fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_schema_version_says_how_to_restore_the_record(
    tmp_home: Path,
    store_where: Path | str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
):
    """``schema_version`` set to 1, deleted or ``abc``, on SQLite and PostgreSQL: reading and
    writing commands exit 1 naming ``fleet``, saying the record is damaged and how to restore
    it, and every row is left as it was."""
    pg = request.getfixturevalue("pg_server") if isinstance(store_where, str) else None
    small_fleet(store_where)
    _sql(store_where, pg, DAMAGE[how])
    dump = "SELECT key, value FROM meta ORDER BY key; SELECT count(*) FROM events"
    before = [_sql(store_where, pg, q) for q in dump.split("; ")]
    monkeypatch.setenv(STORE_ENV, str(store_where))
    for args in (("fleet", "status"), ("versions", "mark", "os=6.1-bad", "--reason", "x")):
        message = refused(run(*args), 1, "fleet")
        assert "damaged" in message and "restore it from a backup" in message, message
        assert f"schema_version back to '{SCHEMA_VERSION}'" in message, message
    assert [_sql(store_where, pg, q) for q in dump.split("; ")] == before


# --------------------------------------------------------------------------- the paths
def test_fleet_migrate_to_a_path_it_cannot_use_names_to(tmp_home: Path, tmp_path: Path):
    """``fleet migrate --to`` a directory (with or without ``--force``), a text file, ``""``
    or ``/proc/self/x.db``: exit 2 naming ``to`` and what is wrong with the path, nothing
    written there and the fleet unchanged."""
    small_fleet(tmp_home / "fleet.db")
    before = record_of(tmp_home / "fleet.db")
    text = tmp_path / "notes.txt"
    text.write_text("not a fleet\n")
    cases = {
        (str(tmp_path),): "is a directory",
        (str(tmp_path), "--force"): "is a directory",
        (str(text),): "not a fleet database",
        (str(text), "--force"): "not a fleet database",
        ("",): "empty",
        ("/proc/self/x.db",): "cannot create /proc/self/x.db",
    }
    for (to, *force), why in cases.items():
        message = refused(run("fleet", "migrate", "--to", to, *force), 2, "to")
        assert why in message, (to, message)
    assert text.read_text() == "not a fleet\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "trainctl-home"]
    assert sorted(p.name for p in tmp_home.iterdir()) == ["fleet.db"]
    assert record_of(tmp_home / "fleet.db") == before


def test_simulate_plot_in_a_format_it_cannot_write_lists_the_formats(
    tmp_home: Path, tmp_path: Path
):
    """``simulate --plot x.txt``: exit 2 naming ``plot`` and the formats it can write, before
    the run, and no file made."""
    plot = tmp_path / "x.txt"
    message = refused(
        run("simulate", "--preset", "small", "--days", "1", "--plot", str(plot)), 2, "plot"
    )
    assert ".txt" in message and all(f".{ext}" in message for ext in ("png", "svg", "pdf"))
    assert not plot.exists()


def test_a_5000_character_request_id_is_quoted_cut(tmp_home: Path, tmp_path: Path):
    """An operation spec whose ``request_id`` is 5,000 characters: exit 2 naming
    ``request_id``, the value quoted cut to about 60 characters and its length said."""
    spec = yaml.safe_load((EXAMPLES / "cuda.yaml").read_text())
    spec["request_id"] = "r" * 5000
    path = tmp_path / "op.yaml"
    path.write_text(yaml.safe_dump(spec))
    message = refused(run("ops", "plan", "--spec", str(path)), 2, "request_id")
    assert "r" * 60 in message and "r" * 61 not in message, message
    assert "5,000 characters" in message and len(message) < 200, message
