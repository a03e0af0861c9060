"""One clock: a simulated fleet's time is the caller's wall time times the fleet's speed.

``--speed max`` is the fastest scaled speed (``MAX_SPEED_FACTOR``); a fleet file built when
``max`` meant a logical clock per cluster opens at that speed, its time going on from the hour
its furthest cluster had reached. The demo runs ``trainctl demo`` at 36,000x for real (its own
embedded Temporal server, a worker and a real SQLite fleet) on two clusters at once and checks
what users care about: every host visited or quarantined, the audit ok, each cluster's time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text
from temporalio.service import RPCError

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.ops_types import OperationInput, OperationStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import PRESETS, Preset
from orchestrator.fleet.settings import MAX_SPEED, MAX_SPEED_FACTOR, parse_speed
from orchestrator.fleet.store_schema import SCHEMA_VERSION
from orchestrator.ops import parse_spec_text
from workflows.bulk_operation import BulkOperation

REPO = Path(__file__).resolve().parent.parent
#: A test-only preset: two clusters shaped like ``small`` (c00 is built exactly as small's c00).
DUO = PRESETS["small"].model_copy(
    update={"name": "duo", "clusters": 2, "description": "two small clusters (tests)"}
)
#: The figures a demo reports per cluster.
FIGURES = ("hosts_visited", "hosts_quarantined", "job_interruptions", "lost_gpu_hours")
#: A version-6 record's per-cluster clocks (a fleet at speed max), as 0.1 wrote them.
CLOCKS_V6 = (
    "CREATE TABLE clocks (cluster TEXT PRIMARY KEY, now REAL NOT NULL);"
    "CREATE TABLE clock_parties (cluster TEXT, party TEXT, workflow_id TEXT, owner TEXT,"
    " parent TEXT, rank INTEGER NOT NULL, epoch TEXT, waiting INTEGER NOT NULL, target REAL,"
    " seen REAL NOT NULL, PRIMARY KEY (cluster, party));"
)


@pytest.fixture
def duo(monkeypatch: pytest.MonkeyPatch) -> Preset:
    monkeypatch.setitem(PRESETS, "duo", DUO)
    return DUO


# ------------------------------------------------------------------- the clock itself
def test_scaled_fleet_derives_every_cluster_from_wall_time(
    store_where: Path | str, duo: Preset
) -> None:
    """Every cluster reads the same hours from ``wall``."""
    wall = datetime(2025, 1, 1, tzinfo=UTC)
    fleet = SqliteFleet.create(store_where, duo, 3, 3600.0, wall=wall)
    try:
        later = wall + timedelta(hours=2)
        assert fleet.fleet_time(later, "c00") == fleet.fleet_time(later, "c01") == 7200.0
    finally:
        fleet.close()


def test_max_is_the_fastest_scaled_speed(tmp_path: Path, duo: Preset) -> None:
    """``max`` is 1e6 fleet seconds per wall second, stored as that number."""
    assert parse_speed("max") == parse_speed("MAX ") == MAX_SPEED == MAX_SPEED_FACTOR == 1e6
    wall = datetime(2025, 1, 1, tzinfo=UTC)
    fleet = SqliteFleet.create(tmp_path / "fleet.db", duo, 3, MAX_SPEED, wall=wall)
    try:
        assert fleet.speed == MAX_SPEED_FACTOR
        assert fleet.fleet_time(wall + timedelta(seconds=36), "c01") == pytest.approx(10_000.0)
    finally:
        fleet.close()


def _as_max_fleet_of_0_1(where: Path | str, clocks: dict[str, float]) -> None:
    """Turn the fleet at ``where`` (SQLite or PostgreSQL) into a version-6 one at speed max."""
    fleet = SqliteFleet(where)
    try:
        with fleet.db.tx() as conn:
            for stmt in [*CLOCKS_V6.split(";"), "DROP TABLE cluster_locks"]:
                if stmt.strip():
                    conn.exec_driver_sql(stmt)
            conn.exec_driver_sql("UPDATE meta SET value='0.0' WHERE key='speed'")
            conn.exec_driver_sql("UPDATE meta SET value='6' WHERE key='schema_version'")
            for cluster, now in clocks.items():
                conn.execute(text("INSERT INTO clocks VALUES (:c, :n)"), {"c": cluster, "n": now})
            conn.exec_driver_sql(
                "INSERT INTO clock_parties VALUES ('c00','d1','d1','t',NULL,0,'e',1,9.0,0.0)"
            )
    finally:
        fleet.close()


def test_a_max_fleet_of_0_1_runs_on_from_its_furthest_cluster(
    store_where: Path | str, duo: Preset
) -> None:
    """A version-6 record at speed max, on SQLite or PostgreSQL, migrates in place: it runs at
    the fastest speed, its time going on from the hour its furthest cluster reached, each
    cluster keeping its lock row and no clock table left."""
    SqliteFleet.create(store_where, duo, 3, 3600.0).close()
    _as_max_fleet_of_0_1(store_where, {"c00": 7.5, "c01": 4.0})
    fleet = SqliteFleet(store_where)
    try:
        assert fleet.get_meta()["schema_version"] == str(SCHEMA_VERSION)
        assert fleet.speed == MAX_SPEED_FACTOR
        hours = [fleet.fleet_time(cluster=c) for c in ("c00", "c01")]
        assert all(7.5 <= h < 7.5 + 600 for h in hours), hours  # minutes of wall time at most
        with fleet.db.snapshot() as conn:
            tables = set(inspect(conn).get_table_names())
            locks = sorted(r[0] for r in conn.exec_driver_sql("SELECT cluster FROM cluster_locks"))
        with fleet.cluster("c01") as b:  # the lock row of each cluster is there to take
            assert b.now >= 7.5
    finally:
        fleet.close()
    assert not {"clocks", "clock_parties"} & tables
    assert locks == ["c00", "c01"]


def test_schema_2_max_fleet_runs_on_from_its_logical_hour(tmp_path: Path, duo: Preset) -> None:
    """A fleet file of schema 2 at speed max (one ``logical_now``) goes on from that hour."""
    path = tmp_path / "fleet.db"
    SqliteFleet.create(path, duo, 3, 3600.0).close()
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP TABLE cluster_locks; UPDATE meta SET value='0.0' WHERE key='speed';"
        "INSERT INTO meta VALUES ('logical_now', '7.5');"
        "UPDATE meta SET value='2' WHERE key='schema_version';"
    )
    conn.close()
    fleet = SqliteFleet(path)
    try:
        assert fleet.get_meta()["schema_version"] == str(SCHEMA_VERSION)
        assert "logical_now" not in fleet.get_meta()
        assert all(7.5 <= fleet.fleet_time(cluster=c) < 7.5 + 600 for c in ("c00", "c01"))
    finally:
        fleet.close()


# -------------------------------------------------------------------------- the demo
#: The speed the two-cluster runs go at: 10 fleet hours a wall second. At ``max`` (1e6) every
#: read of the fleet simulates minutes of fleet time per wall millisecond, so on a loaded
#: machine the run spends its time catching the fleet up rather than maintaining it.
FAST = 36_000.0


def _start_demo(home: Path, preset: str, clusters: int = 1) -> subprocess.Popen[str]:
    """``trainctl demo --speed 36000 --seed 3 --until-cycle-complete --json`` in a subprocess
    (its own embedded server), with the test-only presets known to it."""
    home.mkdir(parents=True, exist_ok=True)
    code = (
        "from tests.test_clock import DUO; from orchestrator.fleet.presets import PRESETS; "
        "PRESETS['duo'] = DUO; from orchestrator.app.cli import entrypoint; entrypoint()"
    )
    args = ["--preset", preset, "--speed", str(int(FAST)), "--seed", "3", "--until-cycle-complete"]
    args += ["--json", "--port", "0", "--ui-port", "0", "--clusters", str(clusters)]
    return subprocess.Popen(
        [sys.executable, "-c", code, "demo", *args],
        cwd=REPO,
        env={**os.environ, "TRAINCTL_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_clusters_at_once_visit_every_host(tmp_path: Path) -> None:
    """Trains on c00 and c01 at once: each completes a cycle with every host
    visited or quarantined, the figures add up per cluster, and the audit passes."""
    proc = _start_demo(tmp_path / "run", "duo", clusters=2)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-2000:]
    out = json.loads(stdout)
    assert out["cycles_completed"] == 1 and out["audit_ok"], out
    assert sorted(out["clusters"]) == ["c00", "c01"]
    for name, figures in out["clusters"].items():
        assert figures["hosts_visited"] + figures["hosts_quarantined"] == 128, (name, figures)
        assert figures["fleet_hours"] > 0
    for key in FIGURES:
        assert out[key] == pytest.approx(sum(f[key] for f in out["clusters"].values())), key


# ------------------------------------------------------------ a workflow across clusters
async def test_operation_across_two_clusters(
    dev_env: Any, tmp_home: Path, task_queue: str, duo: Preset
) -> None:
    """A bulk operation over c00 and c01 succeeds on both, the audit ok."""
    path = tmp_home / "fleet.db"
    SqliteFleet.create(path, duo, 3, FAST).close()
    spec = parse_spec_text(
        json.dumps(
            {
                "kind": "cuda-upgrade",
                "scope": {"cluster": "c0*"},
                "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
                "budget": {"max_unavailable": "25%"},
                "drain": {"max_wait": "2h"},
                "max_failures": 64,
                "request_id": f"clock-{task_queue[-8:]}",
            }
        )
    )
    async with build_worker(dev_env.client, path, task_queue):
        try:
            handle = await dev_env.client.start_workflow(
                BulkOperation.run,
                OperationInput(spec=spec),
                id=spec.operation_id,
                task_queue=task_queue,
            )
            status: OperationStatus = await asyncio.wait_for(handle.result(), timeout=300)
        finally:
            for cluster in ("c00", "c01"):
                with contextlib.suppress(RPCError):
                    arbiter = arbiter_workflow_id(cluster, task_queue)
                    await dev_env.client.get_workflow_handle(arbiter).terminate("test cleanup")
    assert status.state == "succeeded", status.reason
    fleet = SqliteFleet(path)
    try:
        assert audit(fleet).ok
        for cluster in ("c00", "c01"):
            drivers = {
                fleet.peek(cluster).host(h).versions["gpu_driver"]
                for h in fleet.peek(cluster).host_names()
            }
            assert "560.35.03" in drivers, (cluster, drivers)
    finally:
        fleet.close()
