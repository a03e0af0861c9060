"""Bad host or bad build, end to end: a plain cuda-upgrade on `small` at one fleet hour a second.

Real dev server, real worker, the real ``trainctl`` CLI and a real SQLite fleet on its logical
clock. Without ``max_failures`` the bad-build rule decides: a host that was already failing
before its change is quarantined and not counted, a host the change breaks alone is quarantined
and the rollout goes on, and a build that breaks every host it touches stops at once.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import INITIAL_VERSIONS
from tests.e2e import audit_ok, trainctl, worker, write_spec
from tests.train_helpers import host_states, make_fleet

NEW = {"gpu_driver": "590.44.01", "cuda": "13.1"}
OLD = (INITIAL_VERSIONS["gpu_driver"], INITIAL_VERSIONS["cuda"])
FAST = 3_600.0  # one fleet hour per wall second: the planted defect waits for the check


def plain_spec() -> dict[str, Any]:
    """The issue's spec: no max_failures, no budget, no drain settings."""
    return {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "c00"},
        "targets": NEW,
        "request_id": f"gate-{uuid.uuid4().hex[:8]}",
    }


def plant_defect(path: Path, host: str) -> None:
    """Give an in-service host a GPU that already throws Xid errors (before any change)."""
    with sqlite3.connect(path) as db:
        db.execute("UPDATE hosts SET defect = 'xid_errors' WHERE name = ?", (host,))


def upper(versions: dict[str, str]) -> tuple[str, str]:
    return versions["gpu_driver"], versions["cuda"]


async def run_op(dev_env: Any, path: Path, home: Path, monkeypatch: Any) -> tuple[int, dict, str]:
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    queue = f"tq-{uuid.uuid4()}"
    spec = write_spec(home / "cuda.json", plain_spec())
    async with worker(dev_env, path, queue):
        args = ("ops", "start", "--spec", str(spec), "--task-queue", queue, "--wait", "--json")
        return await asyncio.wait_for(trainctl(*args), 400)


async def test_plain_cuda_upgrade_quarantines_bad_hosts_and_succeeds(
    dev_env, tmp_home, monkeypatch
):
    """Without max_failures, a host failing alone is quarantined and the upgrade succeeds with
    >= 95% of hosts on the new stack; a host already bad before is not counted against it."""
    path = make_fleet(tmp_home, FAST, seed=1)
    plant_defect(path, "c00-z01-r005-h03")
    code, out, err = await run_op(dev_env, path, tmp_home, monkeypatch)
    assert code == 0, err
    c00 = out["clusters"]["c00"]
    assert out["state"] == c00["state"] == "succeeded", out["reason"]
    assert c00["hosts_failing_before"] == 1 and c00["failures"] >= 1  # a bad host, not a build
    assert c00["gate_changed"] >= 120 and c00["failures"] <= c00["gate_threshold"]
    assert "bad hosts, not a bad build" in c00["gate_reason"]
    states = host_states(path)
    on_new = [n for n, (_, _, v) in states.items() if upper(v) == upper(NEW)]
    assert len(on_new) >= 0.95 * len(states)
    for name, (state, _, versions) in states.items():  # the rest wait with the targets pending
        if upper(versions) != upper(NEW):
            assert state in ("quarantined", "in_repair"), (name, state)
    fleet = SqliteFleet(path)
    events = [ev for _, ev, _ in fleet.events()]
    targets = fleet.peek("c00").state.targets
    fleet.close()
    assert {k: targets[k] for k in NEW} == NEW  # repair gives the rest the new stack
    planted = [e for e in events if e.host == "c00-z01-r005-h03"]
    assert any(e.kind == "health_checked" and not e.detail["passed"] for e in planted)
    # never changed by the operation: already failing (a repair finishing later in a loaded,
    # long run may give it the new stack, as it does every repaired host)
    assert not any(e.kind == "updated" and e.actor == out["operation_id"] for e in planted)
    quarantined = [e.detail["reason"] for e in planted if e.detail.get("after") == "quarantined"]
    assert quarantined and "failing before the change" in quarantined[0]
    alone = [
        e.detail["reason"]
        for e in events
        if e.detail.get("after") == "quarantined" and e.actor == out["operation_id"]
    ]
    assert any("bad hosts, not a bad build" in why for why in alone), alone
    checked = {e.host for e in events if e.kind == "health_checked"}
    assert {e.host for e in events if e.kind == "updated" and e.actor == out["operation_id"]} <= (
        checked
    )
    audit_ok(path)


async def test_a_build_that_breaks_its_hosts_stops_at_once(dev_env, tmp_home, monkeypatch):
    """A build breaking every host it touches is judged bad within the first hosts: the
    operation fails (exit 1) naming a bad build, and no host keeps it."""
    path = make_fleet(tmp_home, FAST, seed=1)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00") as sim:
        sim.inject_fault("cuda", NEW["cuda"], 1.0, "test")
    fleet.close()
    code, out, err = await run_op(dev_env, path, tmp_home, monkeypatch)
    assert code == 1, err
    assert out["state"] == "failed" and "bad build" in out["reason"], out["reason"]
    fleet = SqliteFleet(path)
    got = {
        str(ev.host)
        for _, ev, _ in fleet.events()
        if ev.kind == "updated" and ev.detail["after"].get("cuda") == NEW["cuda"]
    }
    fleet.close()
    assert 2 <= len(got) <= 8, sorted(got)  # caught within the first hosts it touched
    for name, (state, _, versions) in host_states(path).items():
        if state == "in_service":
            assert upper(versions) == OLD, name
    assert json.dumps(out)  # the one JSON object of --json
    audit_ok(path)
