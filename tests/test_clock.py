"""Logical clocks (``--speed max``): one per cluster, moved like a discrete-event simulator's.

The unit tests drive ``SqliteFleet``'s clock directly, each on SQLite and on PostgreSQL
(``store_where``): a cluster's clock moves only when every party on that cluster waits, to the
earliest instant any of them waits for, one turn at a time; other clusters' clocks never move
with it; a party that vanished cannot hold a clock forever.
The demo tests run ``trainctl demo --speed max`` for real (each run its own embedded Temporal
server, a worker and a real SQLite fleet), two runs at once so that they race for the machine,
and check that the same seed gives the same visits, quarantines, interruptions and lost GPU-hours,
on one cluster and on two clusters advanced together.
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
from temporalio.service import RPCError

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.arbiter_types import arbiter_workflow_id
from orchestrator.contracts.backend import ClockMember
from orchestrator.contracts.ops_types import OperationInput, OperationStatus
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import PRESETS, Preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.fleet.sqlite_clock import CLOCK_BUSY_TIMEOUT_SECONDS
from orchestrator.fleet.store_schema import SCHEMA_VERSION
from orchestrator.ops import parse_spec_text
from workflows.bulk_operation import BulkOperation

REPO = Path(__file__).resolve().parent.parent
#: A test-only preset: two clusters shaped like ``small`` (c00 is built exactly as small's c00).
DUO = PRESETS["small"].model_copy(
    update={"name": "duo", "clusters": 2, "description": "two small clusters (tests)"}
)
#: The figures a run must repeat exactly.
FIGURES = ("hosts_visited", "hosts_quarantined", "job_interruptions", "lost_gpu_hours")

TRAIN = ClockMember("train", "train", "train-c00", None, rank=1)
DOMAIN = ClockMember("d1", "d1", "train-c00", "train")


@pytest.fixture
def duo(monkeypatch: pytest.MonkeyPatch) -> Preset:
    monkeypatch.setitem(PRESETS, "duo", DUO)
    return DUO


def logical_fleet(path: Path | str, preset: Preset) -> SqliteFleet:
    return SqliteFleet.create(path, preset, 3, MAX_SPEED)


# ------------------------------------------------------------------- the clock itself
def test_each_cluster_has_its_own_logical_clock(store_where: Path | str, duo: Preset) -> None:
    """Advancing c01 leaves c00 where it was, and c00's transactions see c00's time only."""
    fleet = logical_fleet(store_where, duo)
    try:
        assert fleet.advance_clock("c01", 40.0) == 40.0
        assert fleet.fleet_time(cluster="c00") == 0.0
        assert fleet.fleet_time(cluster="c01") == 40.0
        with fleet.cluster("c00") as c00:
            assert c00.now == 0.0
        assert fleet.peek("c01").now == 40.0
        assert fleet.advance_clock("c01", 10.0) == 40.0  # never backwards
        with pytest.raises(ValueError, match="cluster"):
            fleet.fleet_time()  # a logical fleet has no fleet-wide time
    finally:
        fleet.close()


def test_scaled_fleet_derives_every_cluster_from_wall_time(
    store_where: Path | str, duo: Preset
) -> None:
    """At a scaled speed nothing changes: every cluster reads the same hours from ``wall``."""
    wall = datetime(2025, 1, 1, tzinfo=UTC)
    fleet = SqliteFleet.create(store_where, duo, 3, 3600.0, wall=wall)
    try:
        later = wall + timedelta(hours=2)
        assert fleet.fleet_time(later, "c00") == fleet.fleet_time(later, "c01") == 7200.0
        assert fleet.clock_leave("c00", owner="anyone") == ()
    finally:
        fleet.close()


def test_clock_moves_only_when_every_party_waits(store_where: Path | str, duo: Preset) -> None:
    """A train that starts a domain does not move time until the domain waits too; then time
    goes to the earliest instant either wants, and a domain's wake gives the train its turn at
    the current instant; the other cluster's clock never moves."""
    fleet = logical_fleet(store_where, duo)
    try:
        turn = fleet.clock_wait("c00", TRAIN, "t1", 1.0, children=["d1"])
        assert (turn.now, turn.released) == (0.0, False)  # d1 acts: nothing moves
        turn = fleet.clock_wait("c00", DOMAIN, "d-1", 0.5)
        assert (turn.now, turn.released, turn.others) == (0.5, True, ())  # earliest first
        turn = fleet.clock_wait("c00", DOMAIN, "d-2", 2.0, wakes=["train"])
        assert turn.now == 0.5 and not turn.released
        assert [(r.party, r.epoch, r.now) for r in turn.others] == [("train", "t1", 0.5)]
        again = fleet.clock_wait("c00", TRAIN, "t1", 1.0)  # asking again: its turn came
        assert again.released and again.now == 0.5
        turn = fleet.clock_wait("c00", TRAIN, "t2", 1.0, children=["d1"])
        assert (turn.now, turn.released) == (1.0, True)
        turn = fleet.clock_wait("c00", TRAIN, "t3", 3.0, children=[])  # d1 ended: it leaves
        assert (turn.now, turn.released) == (3.0, True)
        assert [p["party"] for p in fleet.clock_parties("c00")] == ["train"]
        assert fleet.fleet_time(cluster="c01") == 0.0
    finally:
        fleet.close()


def test_simultaneous_turns_go_by_rank_then_name(store_where: Path | str, duo: Preset) -> None:
    """Parties waiting for the same instant take turns in one order, however they arrived."""
    fleet = logical_fleet(store_where, duo)
    try:
        fleet.clock_wait("c00", TRAIN, "t1", 2.0, children=["d2", "d1"])
        d2 = ClockMember("d2", "d2", "train-c00", "train")
        assert not fleet.clock_wait("c00", d2, "a", 2.0).released
        turn = fleet.clock_wait("c00", DOMAIN, "b", 2.0)
        assert (turn.now, turn.released) == (2.0, True)  # d1 before d2 before the train
        turn = fleet.clock_wait("c00", DOMAIN, "c", 5.0)
        assert [r.party for r in turn.others] == ["d2"]
        turn = fleet.clock_wait("c00", d2, "d", 5.0)
        assert [r.party for r in turn.others] == ["train"] and turn.now == 2.0
    finally:
        fleet.close()


def test_a_party_that_never_waits_again_is_dropped(store_where: Path | str, duo: Preset) -> None:
    """A party given its turn whose workflow then vanished holds the clock only until the
    timeout; a party that leaves (its owner closed) hands the turn on at once."""
    fleet = logical_fleet(store_where, duo)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    try:
        fleet.clock_wait("c00", TRAIN, "t1", 1.0, children=["d1"], wall=t0)
        later = t0 + timedelta(seconds=CLOCK_BUSY_TIMEOUT_SECONDS - 1)
        assert not fleet.clock_wait("c00", TRAIN, "t1", 1.0, wall=later).released
        gone = t0 + timedelta(seconds=CLOCK_BUSY_TIMEOUT_SECONDS + 1)
        turn = fleet.clock_wait("c00", TRAIN, "t1", 1.0, wall=gone)
        assert (turn.now, turn.released) == (1.0, True)  # d1 never waited: dropped

        op = ClockMember("op-c00", "op-c00", "op", None)
        fleet.clock_wait("c00", op, "o1", 4.0, wall=gone)
        fleet.clock_wait("c00", TRAIN, "t2", 2.0, wall=gone)  # the train's turn at 2: it acts
        released = fleet.clock_leave("c00", owner="train-c00", wall=gone)  # ...and stops
        assert [(r.party, r.now) for r in released] == [("op-c00", 4.0)]
        assert [p["party"] for p in fleet.clock_parties("c00")] == ["op-c00"]
    finally:
        fleet.close()


def test_schema_2_fleet_gets_one_clock_per_cluster(tmp_path: Path, duo: Preset) -> None:
    """A fleet file of schema 2 (one ``logical_now``) opens with every cluster at that hour."""
    path = tmp_path / "fleet.db"
    logical_fleet(path, duo).close()
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP TABLE clocks; DROP TABLE clock_parties;"
        "INSERT INTO meta VALUES ('logical_now', '7.5');"
        "UPDATE meta SET value='2' WHERE key='schema_version';"
    )
    conn.close()
    fleet = SqliteFleet(path)
    try:
        assert fleet.get_meta()["schema_version"] == str(SCHEMA_VERSION)
        assert "logical_now" not in fleet.get_meta()
        assert [fleet.fleet_time(cluster=c) for c in ("c00", "c01")] == [7.5, 7.5]
        assert fleet.clock_parties("c00") == []
    finally:
        fleet.close()


# -------------------------------------------------------------------------- the demo
def _start_demo(home: Path, preset: str, clusters: int = 1) -> subprocess.Popen[str]:
    """``trainctl demo --speed max --seed 3 --until-cycle-complete --json`` in a subprocess
    (its own embedded server), with the test-only presets known to it."""
    home.mkdir(parents=True, exist_ok=True)
    code = (
        "from tests.test_clock import DUO; from orchestrator.fleet.presets import PRESETS; "
        "PRESETS['duo'] = DUO; from orchestrator.app.cli import entrypoint; entrypoint()"
    )
    args = ["--preset", preset, "--speed", "max", "--seed", "3", "--until-cycle-complete"]
    args += ["--json", "--port", "0", "--ui-port", "0", "--clusters", str(clusters)]
    return subprocess.Popen(
        [sys.executable, "-c", code, "demo", *args],
        cwd=REPO,
        env={**os.environ, "TRAINCTL_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _demo_twice(tmp: Path, preset: str, clusters: int = 1) -> list[dict[str, Any]]:
    """Two runs at once (they compete for the machine, so their threads interleave
    differently); each run's JSON summary."""
    procs = [_start_demo(tmp / f"run{i}", preset, clusters) for i in (1, 2)]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        outs.append(json.loads(stdout))
    return outs


def _figures(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c: {k: f[k] for k in (*FIGURES, "fleet_hours")} for c, f in out["clusters"].items()}


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _demo_twice(tmp_path_factory.mktemp("small"), "small")


def test_small_demo_at_max_speed_repeats_itself(small_runs: list[dict[str, Any]]) -> None:
    """The same seed gives the same visits, quarantines, interruptions and lost GPU-hours."""
    first, second = small_runs
    for out in small_runs:
        assert out["cycles_completed"] == 1 and out["audit_ok"], out
        assert out["hosts_visited"] + out["hosts_quarantined"] == 128
    assert {k: first[k] for k in FIGURES} == {k: second[k] for k in FIGURES}
    assert _figures(first) == _figures(second)  # and the cluster's clock ends at the same hour


def test_two_clusters_keep_their_own_time(small_runs: list[dict[str, Any]], tmp_path: Path) -> None:
    """Trains on c00 and c01 at once: both runs agree per cluster, and c00 comes out exactly as
    c00 alone (small, same seed): the train on c01 never moved c00's time, nor c00's c01's."""
    first, second = _demo_twice(tmp_path, "duo", clusters=2)
    for out in (first, second):
        assert out["cycles_completed"] == 1 and out["audit_ok"], out
        assert sorted(out["clusters"]) == ["c00", "c01"]
    assert _figures(first) == _figures(second)
    assert _figures(first)["c00"] == _figures(small_runs[0])["c00"]
    hours = {c: f["fleet_hours"] for c, f in first["clusters"].items()}
    assert hours["c00"] != hours["c01"]
    for f in first["clusters"].values():
        assert f["fleet_hours"] == pytest.approx(f["cycle_fleet_hours"], abs=1e-3)


# ------------------------------------------------------------ a workflow across clusters
async def test_operation_across_two_clusters_keeps_each_clock(
    dev_env: Any, tmp_home: Path, task_queue: str, duo: Preset
) -> None:
    """A bulk operation over c00 and c01 at speed max: each cluster's operation is a party of
    that cluster's clock only; both clocks move, each on its own, and no party is left behind."""
    path = tmp_home / "fleet.db"
    logical_fleet(path, duo).close()
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
        hours = [fleet.fleet_time(cluster=c) for c in ("c00", "c01")]
        parties = [fleet.clock_parties(c) for c in ("c00", "c01")]
        assert audit(fleet).ok
    finally:
        fleet.close()
    assert all(h > 0 for h in hours) and hours[0] != hours[1], hours
    assert parties == [[], []]
