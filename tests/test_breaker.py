"""The circuit breaker per cluster: a burst of failures on one cluster pauses its train and its
operation (nothing on other clusters), fires the metric and the alert, and a reset resumes
exactly what it paused, recorded with who and why."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.breaker_watch import breaker_views, watching_breakers
from orchestrator.app.worker import build_worker
from orchestrator.contracts.breaker_types import BreakerSettings
from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.breaker_store import (
    breaker_view,
    note_paused,
    note_reset,
    set_breaker_settings,
    trip_if_due,
)
from orchestrator.fleet.ledger_files import open_store
from orchestrator.fleet.presets import get_preset
from orchestrator.ops.client import (
    OperationEnded,
    control_operation,
    operation_status,
    start_operation,
)
from orchestrator.telemetry import metrics
from orchestrator.train.client import control_train, start_train, train_result, train_status
from tests.e2e import trainctl
from tests.rule_tests import promtool_rule_test
from tests.test_approvals import eventually
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)
from tests.test_metrics_rules import _alert, _series

BAD_OS = "6.12.0-bad"
OP_ID = "ops-breaker-bmc"


def test_breaker_alert_fires_while_a_cluster_breaker_is_open(tmp_path: Path) -> None:
    """ClusterBreakerOpen fires at once for the open cluster, and not for a closed one."""
    series = [
        _series("trainctl_breaker_open", {"cluster": "c00"}, "0x5 1x20 0x10"),
        _series("trainctl_breaker_open", {"cluster": "c01"}, "0x35"),
    ]
    promtool_rule_test(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    _alert("3m", "ClusterBreakerOpen"),
                    _alert("10m", "ClusterBreakerOpen", {"cluster": "c00"}),
                    _alert("30m", "ClusterBreakerOpen"),
                ],
            }
        ],
    )


def seeded_fleet(home: Path) -> Path:
    """``multi``, with a bad OS build that fails half the hosts it lands on, and a breaker on
    each cluster that tolerates 3 failures within 1000 fleet hours. One fleet hour a wall
    second: the breaker (looked at every 0.2 s here) opens long before the operation's own
    bad-build verdict could end it, however loaded the machine."""
    path = multi_fleet(home, speed=3600.0)
    fleet = SqliteFleet(path)
    with fleet.cluster("c00") as sim:
        sim.inject_fault("os", BAD_OS, 0.5, "test")
    fleet.close()
    db = open_store(path)
    set_breaker_settings(db, BreakerSettings.model_validate({"max_failures": 3, "window": "1000h"}))
    db.close()
    return path


def train(cluster: str, targets: dict[str, str]) -> TrainSpec:
    return TrainSpec.model_validate(
        {
            "cluster": cluster,
            "domain_size": 2,
            "targets": targets,
            "budget": {"max_unavailable": "40%", "maintenance": "4%"},
            "halt_after_failures": 1000,
            "halt_failure_rate": 1.0,
        }
    )


async def states(client: Any) -> dict[str, str]:
    return {
        "train-c00": (await train_status(client, "c00")).state,
        "train-c01": (await train_status(client, "c01")).state,
        OP_ID: (await operation_status(client, OP_ID)).state,
    }


@pytest.mark.asyncio(loop_scope="session")
async def test_burst_on_one_cluster_pauses_its_train_and_operation_until_reset(
    dev_env, tmp_home, task_queue, monkeypatch
):
    """Failures past the limit open c00's breaker: its train and its operation pause (c01's
    train does not), the gauge says so; `breaker reset` resumes exactly those two."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = seeded_fleet(tmp_home)
    client = dev_env.client
    op = OperationSpec.model_validate(
        {
            "kind": "lower-layer",
            "scope": {"cluster": "c00"},
            "targets": {"os": BAD_OS},
            "request_id": "breaker-bmc",
            "max_failures": 60,
            # Quarantined hosts fill max_unavailable: room enough that the operation never
            # fails waiting for it (only the breaker stops it).
            "budget": {"max_unavailable": "40%", "maintenance": "5%"},
            "max_wait_for_room": "1000h",
        }
    )
    async with build_worker(client, path, task_queue):
        await start_train(client, train("c00", {"os": BAD_OS}), task_queue=task_queue)
        await start_train(client, train("c01", {"bios": "3.2"}), task_queue=task_queue)
        await start_operation(client, op, clusters=["c00"], task_queue=task_queue)
        async with watching_breakers(client, path, every=0.2):  # as `trainctl worker` does
            paused = await eventually(
                lambda: states(client), lambda s: s["train-c00"] == s[OP_ID] == "paused"
            )

            async def view_now() -> Any:  # the watch records what it paused after pausing
                (view,) = breaker_views(path, "c00")
                return view

            both = sorted(["train-c00", OP_ID])
            opened = await eventually(view_now, lambda v: sorted(v.paused) == both)

            async def gauge_now() -> float | None:  # the watch reports after it paused
                return metrics.REGISTRY.get_sample_value(
                    "trainctl_breaker_open", {"cluster": "c00"}
                )

            gauge = await eventually(gauge_now, lambda g: g == 1.0)
        code_s, shown, _ = await trainctl("breaker", "status", "--cluster", "c00", "--json")
        code_r, after, err = await trainctl(
            "breaker", "reset", "--cluster", "c00", "--reason", "bad build marked", "--by", "alice",
            "--json",
        )  # fmt: skip
        resumed = await states(client)
        with contextlib.suppress(OperationEnded):  # its bad build may have failed it meanwhile
            await control_operation(client, OP_ID, "abort", "test over")
        for cluster in ("c00", "c01"):
            await control_train(client, cluster, "stop", "test over")
            await asyncio.wait_for(train_result(client, cluster), 120)
        await eventually(
            lambda: operation_status(client, OP_ID), lambda s: s.state in ("aborted", "failed")
        )
        audit_code, _, _ = await trainctl("audit", "--json")
    assert paused["train-c01"] != "paused"
    assert opened.state == "open" and opened.failures_in_window > 3
    assert sorted(opened.paused) == sorted(["train-c00", OP_ID])
    assert "hosts failed within 1000 fleet hours (at most 3 tolerated)" in opened.reason
    assert gauge == 1.0
    assert (
        code_s == 0
        and shown["state"] == "open"
        and sorted(shown["paused"]) == sorted(opened.paused)
    )
    assert code_r == 0 and after["state"] == "closed", err
    last = after["last_reset"]
    assert (last["who"], last["reason"]) == ("alice", "bad build marked")
    assert sorted(last["resumed"]) == sorted(["train-c00", OP_ID])
    assert resumed["train-c00"] != "paused" and resumed[OP_ID] != "paused"
    assert resumed["train-c01"] != "paused"
    assert audit_code == 0


def test_breaker_record_opens_once_and_a_reset_forgives_on_both_stores(
    store_where: Path | str,
) -> None:
    """On SQLite and PostgreSQL: failures past the limit open the breaker once (a second look
    opens nothing), what it paused is kept, and a reset closes it, naming who and why, and
    forgives the failures seen so far."""
    fleet = SqliteFleet.create(store_where, get_preset("small"), 1, 1.0)
    with fleet.cluster("c00") as sim:
        for name in sim.host_names()[:3]:  # cordoned by an owner, failed, handed on
            assert sim.cordon(name, "ops-x", "ops-x", limit=10)
            sim.quarantine(name, "ops-x", "verification failed")
        sim.close_owner("ops-x", "ops-x")
    fleet.close()
    db = open_store(store_where)
    try:
        set_breaker_settings(db, BreakerSettings(max_failures=2))
        first, opened = trip_if_due(db, "c00", 1000.0)
        again, reopened = trip_if_due(db, "c00", 1001.0)
        note_paused(db, "c00", ["train-c00"], 1002.0)
        held = breaker_view(db, "c00")
        note_reset(db, "c00", "alice", "racks reseated", ["train-c00"], 1003.0)
        after, tripped_after = trip_if_due(db, "c00", 1004.0)
        other = breaker_view(db, "c01")
    finally:
        db.close()
    assert opened and first.state == "open" and first.failures_in_window == 3
    assert not reopened and again.state == "open"
    assert held.paused == ["train-c00"] and held.reason == first.reason
    assert not tripped_after and after.state == "closed" and after.failures_in_window == 0
    reset = after.last_reset
    assert reset is not None and (reset.who, reset.reason, reset.resumed) == (
        "alice",
        "racks reseated",
        ["train-c00"],
    )
    assert other.state == "closed" and other.failures_in_window == 0
