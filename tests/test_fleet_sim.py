"""The simulated fleet on real SQLite: determinism, scheduling, failure rates, concurrency.

Fleets here run at speed 1.0 from a fixed anchor, so ``ANCHOR + timedelta(hours=h)`` is fleet
hour ``h`` exactly and no test depends on the wall clock.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.contracts.models import GPUS_PER_HOST
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.fleet.presets import INITIAL_VERSIONS, PRESETS

ANCHOR = datetime(2025, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    """The wall time at which a speed-1.0 fleet anchored at ANCHOR reaches fleet hour ``hours``."""
    return ANCHOR + timedelta(hours=hours)


def make(path: Path | str, preset: str, seed: int) -> SqliteFleet:
    return SqliteFleet.create(path, PRESETS[preset], seed, 1.0, wall=ANCHOR)


def tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {
            "hosts": conn.execute("SELECT * FROM hosts ORDER BY name").fetchall(),
            "jobs": conn.execute("SELECT * FROM jobs ORDER BY cluster, id").fetchall(),
            "events": conn.execute("SELECT * FROM events ORDER BY seq").fetchall(),
            "clusters": conn.execute("SELECT * FROM clusters ORDER BY name").fetchall(),
        }
    finally:
        conn.close()


def test_same_seed_same_fleet_whatever_the_access_pattern(tmp_path: Path) -> None:
    """One seed taken to day 10 in one jump or in 41 steps gives identical tables; seeds differ."""
    one_jump = make(tmp_path / "a.db", "meta-24k", seed=7)
    stepped = make(tmp_path / "b.db", "meta-24k", seed=7)
    other = make(tmp_path / "c.db", "meta-24k", seed=8)
    with one_jump.cluster("c00", at(240)):
        pass
    for hour in [*range(0, 240, 6), 240]:
        with stepped.cluster("c00", at(hour)):
            pass
    with other.cluster("c00", at(240)):
        pass
    a, b, c = (tables(f.path) for f in (one_jump, stepped, other))
    kinds = Counter(row[4] for row in a["events"])
    assert kinds["job_start"] > 100 and kinds["failure"] > 20, kinds
    assert a == b
    assert a["events"] != c["events"]
    assert a["hosts"] != c["hosts"]


def _change_cuda(sim: ClusterSim, names: list[str], cuda: str, owner: str) -> list[str]:
    """Move ``names`` to ``cuda`` through the maintenance path; return the hosts now on it."""
    targets = {"cuda": cuda}
    done = []
    for name in names:
        if not sim.cordon(name, owner, owner, limit=len(sim.hosts)):
            continue  # in repair: it is out of service anyway
        job = sim.job_of(name)
        if job is not None:
            sim.evict(job.id, owner)
        assert sim.begin_update(name, owner)
        for attempt in range(5):  # installs fail at random, transiently or for good
            out = sim.apply_updates(name, targets, owner, str(attempt))
            if out.ok or out.permanent:
                break
        passed = out.ok and sim.verify(name, targets, owner)[0]
        if passed and sim.return_to_service(name, owner):
            done.append(name)
        else:
            sim.quarantine(name, owner, "cuda change failed")
    return done


def test_scheduler_never_uses_unavailable_hosts_or_mixes_versions(store_where: Path | str) -> None:
    """Replaying the log, every job starts on in-service hosts that share gpu_driver and cuda
    (on either store)."""
    fleet = make(store_where, "small", seed=5)
    held = [f"c00-z0{z}-r00{r}-h0{h}" for z in (0, 1) for r in (1, 4, 6) for h in (2, 5)]
    with fleet.cluster("c00", at(1)) as sim:
        for name in held:
            assert sim.cordon(name, "hold", "test", limit=128)
    zone1 = [n for n in sim.order if n.startswith("c00-z01-") and n not in held]
    with fleet.cluster("c00", at(2)) as sim:
        upgraded = _change_cuda(sim, zone1, "12.6", "bulk-cuda")
    assert len(upgraded) >= 40
    for hour in range(6, 24 * 8, 6):
        with fleet.cluster("c00", at(hour)) as sim:
            if hour == 96:  # hand half the held hosts back mid-way
                for name in held[::2]:
                    sim.release(name, "test")

    state: dict[str, str] = {}
    upper: dict[str, tuple[str, str]] = {}
    initial = (INITIAL_VERSIONS["gpu_driver"], INITIAL_VERSIONS["cuda"])
    starts_by_cuda: Counter[str] = Counter()
    starts_with_hosts_held = 0
    for _, ev, _ in fleet.events():
        if ev.kind == "host_state" and ev.host:
            state[ev.host] = ev.detail["after"]
        elif ev.kind == "updated" and ev.host:
            drv, cuda = upper.get(ev.host, initial)
            after = ev.detail["after"]
            upper[ev.host] = (after.get("gpu_driver", drv), after.get("cuda", cuda))
        elif ev.kind == "job_start":
            hosts = ev.detail["hosts"]
            bad = [h for h in hosts if state.get(h, "in_service") != "in_service"]
            assert not bad, f"job {ev.detail['job']} placed on out-of-service hosts {bad}"
            versions = {upper.get(h, initial) for h in hosts}
            assert len(versions) == 1, f"job {ev.detail['job']} on mixed versions {versions}"
            starts_by_cuda[versions.pop()[1]] += 1
            starts_with_hosts_held += any(s != "in_service" for s in state.values())
    # The check above only means something if the scheduler had both choices to make.
    assert starts_by_cuda["12.4"] >= 5 and starts_by_cuda["12.6"] >= 5, starts_by_cuda
    assert starts_with_hosts_held >= 10


def test_failures_arrive_at_the_calibrated_rate(tmp_path: Path) -> None:
    """Over 30 fleet days on meta-24k, failures match 1 per 50,000 GPU-hours; faulty GPUs lead."""
    fleet = make(tmp_path / "f.db", "meta-24k", seed=11)
    with fleet.cluster("c00", at(30 * 24)):
        pass
    failures = [ev for _, ev, _ in fleet.events() if ev.kind == "failure"]
    gpu_hours = 3072 * GPUS_PER_HOST * 30 * 24
    expected = gpu_hours * dyn.FAILURES_PER_GPU_HOUR  # ~354
    # Poisson: 4 standard deviations either side (hosts already down cannot fail, so a bit low).
    tolerance = 4 * expected**0.5
    assert expected - tolerance <= len(failures) <= expected + tolerance, len(failures)
    causes = Counter(ev.detail["cause"] for ev in failures)
    assert causes.most_common(1)[0][0] == "faulty_gpu", causes
    assert 0.25 <= causes["faulty_gpu"] / len(failures) <= 0.45, causes
    assert set(causes) <= {c for c, _, _ in dyn.FAILURE_CAUSES}


SHARED = [f"c00-z00-r002-h0{h}" for h in range(8)]


def _toggle(path: str, actor: str, rounds: int, barrier: Any) -> None:
    """Child process: cordon or release each shared host ``rounds`` times, one transaction each."""
    fleet = SqliteFleet(path if "://" in path else Path(path))
    barrier.wait()
    for _ in range(rounds):
        for name in SHARED:
            with fleet.cluster("c00", ANCHOR) as sim:
                if sim.hosts[name].state == "in_service":
                    assert sim.cordon(name, actor, actor, limit=128)
                else:
                    sim.release(name, actor)
            # Let the other process in: SQLite's busy handler is not fair, and a process that
            # commits back to back can starve the other until it is done.
            time.sleep(0.002)
    fleet.close()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_two_processes_lose_no_event(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """Two processes toggling the same hosts at once, on either store: every event kept, in a
    consistent chain."""
    where = request.getfixturevalue("pg_store") if store == "postgresql" else tmp_path / "f.db"
    fleet = SqliteFleet.create(where, PRESETS["small"], 3, 1.0, wall=ANCHOR)
    before = [seq for seq, _, _ in fleet.events()]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    rounds = {"p0": 25, "p1": 24}  # 49 toggles per host: all cordoned at the end
    procs = [
        ctx.Process(target=_toggle, args=(str(where), actor, n, barrier))
        for actor, n in rounds.items()
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]

    events = list(fleet.events())
    seqs = [seq for seq, _, _ in events]
    assert seqs == list(range(1, len(seqs) + 1))
    ours = [(seq, ev) for seq, ev, _ in events if seq > max(before, default=0)]
    by_actor = Counter(ev.actor for _, ev in ours)
    assert by_actor == {a: n * len(SHARED) for a, n in rounds.items()}
    turns = sum(a.actor != b.actor for (_, a), (_, b) in zip(ours, ours[1:], strict=False))
    assert turns >= 20, "the two processes did not actually run at the same time"
    last: dict[str, Any] = {}
    for _, ev in ours:
        assert ev.kind == "host_state" and ev.host in SHARED
        prev = last.get(ev.host)
        # A lost update would show as two cordons (or releases) in a row.
        assert ev.detail["before"] == (prev.detail["after"] if prev else "in_service")
        last[ev.host] = ev
    with fleet.cluster("c00", ANCHOR) as sim:
        for name in SHARED:
            assert sim.hosts[name].state == "cordoned" == last[name].detail["after"]
            assert sim.hosts[name].owner == last[name].actor
