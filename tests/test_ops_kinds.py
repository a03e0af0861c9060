"""Every kind of operation ends, each host in scope changed once (issue 10, defect 1).

A ``kind: reboot`` operation changes no versions, so "done" cannot be read off the versions: it
is done on a host that has booted since the operation began. Before that rule it re-planned the
same hosts after every wave (44 waves, 264 reboots of 16 hosts) until aborted. On the dev server
with a real SQLite fleet at speed ``max``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter

from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import parse_spec_text
from orchestrator.ops.client import start_operation
from tests.e2e import audit_ok, worker
from tests.train_helpers import host_states, make_fleet

RACKS = ["z01-r005", "z01-r006"]


async def test_reboot_operation_reboots_each_host_once_and_ends(dev_env, tmp_home):
    path = make_fleet(tmp_home, MAX_SPEED)
    spec = parse_spec_text(
        json.dumps(
            {
                "kind": "reboot",
                "scope": {"cluster": "c00", "racks": RACKS},
                "budget": {"max_unavailable": "10%"},
                "drain": {"max_wait": "2h"},
                "max_failures": 16,
                "request_id": f"reboot-{uuid.uuid4().hex[:6]}",
            }
        )
    )
    in_scope = {n for n in host_states(path) if any(f"-{r}-" in n for r in RACKS)}
    queue = f"tq-{uuid.uuid4()}"
    async with worker(dev_env, path, queue):
        start = await asyncio.wait_for(
            start_operation(dev_env.client, spec, clusters=["c00"], task_queue=queue, wait=True),
            120,
        )
    status = start.status
    assert status is not None and status.state == "succeeded", status
    fleet = SqliteFleet(path)
    try:
        boots = Counter(
            ev.host
            for _, ev, _ in fleet.events()
            if ev.actor == spec.operation_id and ev.kind == "updated"
        )
    finally:
        fleet.close()
    assert len(in_scope) == 16
    assert set(boots) <= in_scope
    assert all(n == 1 for n in boots.values()), boots  # once each, never again
    c00 = status.clusters["c00"]
    accounted = c00.hosts_changed + c00.hosts_quarantined + c00.hosts_deferred + c00.already_done
    assert accounted == len(in_scope) and c00.hosts_changed == len(boots), c00
    assert c00.waves_done <= 4, c00  # 13 hosts a wave at 10% of 128
    audit_ok(path)


def test_fleet_of_schema_3_gains_boot_times(tmp_path):
    """A schema-3 fleet file (no ``last_boot``) opens migrated, its hosts with no known boot."""
    import sqlite3

    from orchestrator.fleet.presets import get_preset
    from orchestrator.fleet.store_schema import SCHEMA_VERSION

    path = tmp_path / "fleet.db"
    SqliteFleet.create(path, get_preset("small"), 1, MAX_SPEED).close()
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE h3 AS SELECT name, cluster, zone, rack, state, versions, job_id, reason,"
        " owner, repair_until, defect, last_visit, verified, updates FROM hosts;"
        "DROP TABLE hosts; ALTER TABLE h3 RENAME TO hosts;"
        "UPDATE meta SET value='3' WHERE key='schema_version';"
    )
    conn.close()
    fleet = SqliteFleet(path)
    try:
        assert fleet.get_meta()["schema_version"] == str(SCHEMA_VERSION) == "8"
        snap = fleet.peek("c00").snapshot()
        assert len(snap.hosts) == 128 and all(h.last_boot is None for h in snap.hosts)
    finally:
        fleet.close()
