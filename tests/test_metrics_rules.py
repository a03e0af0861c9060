"""Operation, campaign and train metrics, and the rules and panels over them (issue 25).

Every series an alert rule or a dashboard panel names is one the worker's registry exports;
every dashboard expression is PromQL promtool accepts; promtool's rule tests drive each new or
changed alert (the budget alert reads the train's limit, a stopped train's off-track cycle stops
alerting, operations stuck or failing, campaigns held); a stopped train's series go; the
operations watch reports what ``ops status`` reports. No server: a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY
from temporalio.testing import ActivityEnvironment

from activities.campaign_activities import CampaignActivities
from activities.fleet_activities import FleetActivities
from orchestrator.app import ops_watch as watch
from orchestrator.app.demo import free_port
from orchestrator.contracts.campaign_types import PromQuery
from orchestrator.contracts.messages import CycleCounts, HostsRequest
from orchestrator.contracts.ops_types import ClusterProgress, OperationStatus
from orchestrator.ops.client import OperationNotFound
from orchestrator.telemetry import metrics
from tests.rule_tests import ALERTS, promtool_rule_test
from tests.train_helpers import make_fleet

DASHBOARD = ALERTS.parent / "grafana" / "trainctl.json"
NAME = re.compile(r"\btrainctl_[a-z_]+\b")


def _rule_exprs() -> list[str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def _panel_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p["targets"]]


def _sample(name: str, labels: dict[str, str]) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


# ----------------------------------------------------------------- rules and panels name
def test_every_series_a_rule_or_panel_names_is_exported():
    """Each ``trainctl_*`` name in deploy/alerts.yml and the Grafana dashboard is exported."""
    exported = metrics.exported_names()
    named = {n for e in _rule_exprs() + _panel_exprs() for n in NAME.findall(e)}
    assert named, "no trainctl_ series named"
    assert named <= exported, f"named but never exported: {sorted(named - exported)}"
    # What issue 25 asks the dashboard to show.
    panels = " ".join(_panel_exprs())
    for name in (
        "trainctl_budget_limit_hosts",
        "trainctl_campaign_state",
        "trainctl_operation_waves_done",
        "trainctl_operation_hosts",
        "trainctl_cycle_off_track",
    ):
        assert name in panels, name


def test_dashboard_expressions_are_promql(tmp_path: Path):
    """promtool parses every panel's expression (as recording rules) and the shipped rules."""
    rules = {
        "groups": [
            {
                "name": "panels",
                "rules": [
                    {"record": f"panel:expr{i}", "expr": e} for i, e in enumerate(_panel_exprs())
                ],
            }
        ]
    }
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump(rules))
    out = subprocess.run(
        ["promtool", "check", "rules", str(path), str(ALERTS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "92" not in next(e for e in _rule_exprs() if "budget_limit_hosts" in e and "0.9" in e)


# ----------------------------------------------------------------------- promtool tests
def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _alert(at: str, name: str, *fired: dict[str, str], value: float = 1) -> dict[str, Any]:
    """At ``at``, ``name`` fires for exactly the ``fired`` label sets (none: it does not)."""
    exp = [_fired(name, labels, value) for labels in fired]
    return {"eval_time": at, "alertname": name, "exp_alerts": exp}


def _rule(name: str) -> dict[str, Any]:
    doc = yaml.safe_load(ALERTS.read_text())
    return next(r for g in doc["groups"] for r in g["rules"] if r.get("alert") == name)


def _fired(name: str, labels: dict[str, str], value: float = 1) -> dict[str, Any]:
    """The alert ``name`` as it fires for ``labels`` (its summary rendered with ``value``)."""
    rule = _rule(name)
    summary = rule["annotations"]["summary"].replace("{{ $value }}", f"{value:g}")
    for k, v in labels.items():
        summary = summary.replace(f"{{{{ $labels.{k} }}}}", v)
    return {
        "exp_labels": {**rule["labels"], **labels},
        "exp_annotations": {"summary": summary},
    }


def test_budget_and_cycle_alerts_follow_the_train(tmp_path: Path):
    """The budget alert compares with the train's maintenance limit (10 hosts here, not 92);
    a stopped train (its series gone) fires neither it nor VisitCycleOffTrack."""
    c00, c01 = {"cluster": "c00"}, {"cluster": "c01"}
    promtool_rule_test(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    _series("trainctl_hosts_out_of_service", c00, "10x120"),
                    _series(
                        "trainctl_budget_limit_hosts", {**c00, "limit": "maintenance"}, "10x120"
                    ),
                    _series("trainctl_hosts_out_of_service", c01, "10x120"),
                    _series(
                        "trainctl_budget_limit_hosts", {**c01, "limit": "maintenance"}, "92x120"
                    ),
                ],
                "alert_rule_test": [
                    _alert("20m", "MaintenanceBudgetNearlyExhausted"),
                    _alert("40m", "MaintenanceBudgetNearlyExhausted", c00, value=10),
                ],
            },
            {
                # Off track for 2h, then the train stops at 2h: its series go (stale).
                "interval": "1m",
                "input_series": [
                    _series("trainctl_cycle_off_track", c00, "1x120 stale"),
                    _series("trainctl_hosts_out_of_service", c00, "10x240"),
                    _series(
                        "trainctl_budget_limit_hosts",
                        {**c00, "limit": "maintenance"},
                        "10x120 stale",
                    ),
                ],
                "alert_rule_test": [
                    _alert("90m", "VisitCycleOffTrack", c00),
                    _alert("150m", "VisitCycleOffTrack"),
                    _alert("100m", "MaintenanceBudgetNearlyExhausted", c00, value=10),
                    _alert("170m", "MaintenanceBudgetNearlyExhausted"),
                ],
            },
        ],
    )


def test_operation_and_campaign_alerts(tmp_path: Path):
    """Stuck: running 6h with no wave done (a progressing, a paused or a young operation is
    not); failing: hosts failed while it runs; failed; campaigns held, by the Prometheus gate."""
    stuck, moving, paused, young = ({"operation": f"ops-{n}"} for n in ("a", "b", "c", "d"))
    state = "trainctl_operation_state"
    waves = "trainctl_operation_waves_done"
    series = [
        _series(state, {**stuck, "state": "running"}, "1x480"),
        _series(waves, {**stuck, "cluster": "c00"}, "2x480"),
        _series(state, {**moving, "state": "running"}, "1x480"),
        _series(waves, {**moving, "cluster": "c00"}, "0+1x480"),
        _series(state, {**paused, "state": "running"}, "0x480"),
        _series(state, {**paused, "state": "paused"}, "1x480"),
        _series(waves, {**paused, "cluster": "c00"}, "1x480"),
        _series(state, {**young, "state": "running"}, "_x300 1x180"),
        _series(waves, {**young, "cluster": "c00"}, "_x300 0x180"),
    ]
    failing, done, failed = ({"operation": f"ops-{n}"} for n in ("e", "f", "g"))
    hosts = "trainctl_operation_hosts"
    series += [
        _series(state, {**failing, "state": "running"}, "1x60"),
        _series(hosts, {**failing, "cluster": "c00", "outcome": "failed"}, "0x10 2x50"),
        _series(hosts, {**failing, "cluster": "c01", "outcome": "failed"}, "0x20 1x40"),
        _series(state, {**done, "state": "succeeded"}, "1x60"),
        _series(hosts, {**done, "cluster": "c00", "outcome": "failed"}, "1x60"),
        _series(state, {**failed, "state": "failed"}, "0x10 1x50"),
    ]
    held, gated, running = ({"campaign": n} for n in ("held", "gated", "running"))
    cstate, gate = "trainctl_campaign_state", "trainctl_campaign_gate_holding"
    series += [
        _series(cstate, {**held, "state": "held"}, "1x120"),
        _series(cstate, {**gated, "state": "held"}, "1x120"),
        _series(gate, {**gated, "gate": "prometheus"}, "1x120"),
        _series(cstate, {**running, "state": "held"}, "0x120"),
        _series(gate, {**running, "gate": "prometheus"}, "1x120"),
    ]
    promtool_rule_test(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    _alert("5h", "OperationStuck"),
                    _alert("7h", "OperationStuck", stuck),
                    _alert("5m", "OperationHostsFailing"),
                    _alert("30m", "OperationHostsFailing", failing, value=3),
                    _alert("30m", "OperationFailed", failed),
                    _alert("5m", "OperationFailed"),
                    _alert("40m", "CampaignHeld"),
                    _alert("90m", "CampaignHeld", held, gated),
                    _alert("20m", "CampaignHeldByPrometheusGate"),
                    _alert("40m", "CampaignHeldByPrometheusGate", gated),
                ],
            },
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {  # the failing operation's failures add up over its clusters
                        "expr": 'sum by (operation) (trainctl_operation_hosts{outcome="failed"})',
                        "eval_time": "30m",
                        "exp_samples": [
                            {"labels": '{operation="ops-e"}', "value": 3},
                            {"labels": '{operation="ops-f"}', "value": 1},
                        ],
                    }
                ],
            },
        ],
    )


# ----------------------------------------------------------------------- the worker side
def test_a_stopped_train_leaves_no_cycle_or_budget_series(tmp_path: Path):
    """close_owner of ``train-<cluster>`` (what ``train stop`` ends with) removes its cycle and
    budget series; an operation's close on the same cluster leaves them."""
    path = make_fleet(tmp_path, 3600.0)
    counts = CycleCounts(hosts_total=128, visited=10, due=118, fleet_hours=5.0)
    acts = FleetActivities(path)

    def set_train(cluster: str) -> None:
        metrics.record_cycle(cluster, counts, 0.0, 1.0)  # far behind: off track
        metrics.BUDGET_LIMIT.labels(cluster, "maintenance").set(6)

    def close(owner: str) -> None:
        acts.close_owner(HostsRequest(cluster="c00", owner=owner, hosts=[], wall=datetime.now(UTC)))

    set_train("c00")
    assert _sample("trainctl_cycle_off_track", {"cluster": "c00"}) == 1
    close("ops-nightly")
    assert _sample("trainctl_cycle_off_track", {"cluster": "c00"}) == 1
    close("train-c00")
    for name in ("trainctl_cycle_off_track", "trainctl_cycle_target_hours"):
        assert _sample(name, {"cluster": "c00"}) is None, name
    assert (
        _sample("trainctl_budget_limit_hosts", {"cluster": "c00", "limit": "maintenance"}) is None
    )
    close("train-c00")  # twice (a retried activity) is fine
    set_train("c00")  # a new train on the cluster reports again
    assert _sample("trainctl_cycle_off_track", {"cluster": "c00"}) == 1
    metrics.clear_train("c00")


async def test_prometheus_gate_look_sets_the_holding_gauge():
    """The gate's activity says per campaign whether it holds (here: an answer it cannot read,
    which holds the stage as the gate does)."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="campaign-k1")
    acts = CampaignActivities(Path("/nonexistent/fleet.db"), None, "q")  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{free_port(0)}"
    answer = await env.run(acts.prometheus, PromQuery(url=url, query="up"))
    assert answer.firing == -1
    labels = {"campaign": "k1", "gate": "prometheus"}
    assert _sample("trainctl_campaign_gate_holding", labels) == 1
    metrics.campaign_gate("k1", "prometheus", False)
    assert _sample("trainctl_campaign_gate_holding", labels) == 0


def _status(op: str, state: str, waves_done: int, failures: int = 0) -> OperationStatus:
    c00 = ClusterProgress(
        cluster="c00",
        state="updating",
        waves_total=4,
        waves_done=waves_done,
        hosts_in_scope=32,
        hosts_changed=8 * waves_done,
        failures=failures,
        hosts_quarantined=failures,
        hosts_deferred=2,
    )
    return OperationStatus(
        operation_id=op,
        kind="lower-layer",
        targets={"cuda": "12.8"},
        consistency="job",
        state=state,
        waves_total=4,
        waves_done=waves_done,
        clusters={"c00": c00},
    )


class _Listed:
    def __init__(self, wid: str) -> None:
        self.id = wid


class _FakeClient:
    def __init__(self) -> None:
        self.running: list[str] = []
        self.queries: list[str] = []

    async def _list(self) -> AsyncIterator[_Listed]:
        for wid in self.running:
            yield _Listed(wid)

    def list_workflows(self, query: str) -> AsyncIterator[_Listed]:
        self.queries.append(query)
        return self._list()


async def test_operation_watch_reports_what_ops_status_says(monkeypatch: pytest.MonkeyPatch):
    """Running operations are asked each look; one that ended is reported once more with its
    final state, and its series go after ``keep``."""
    answers: dict[str, OperationStatus] = {"ops-w1": _status("ops-w1", "running", 1)}

    async def status(client: Any, op: str) -> OperationStatus:
        if op == "ops-deleted":
            raise OperationNotFound(f"id: no operation {op!r}")
        if op not in answers:
            raise RuntimeError("not answering")
        return answers[op]

    monkeypatch.setattr(watch, "operation_status", status)
    client = _FakeClient()
    look = watch.OperationWatch(client, keep=3600.0)  # type: ignore[arg-type]
    client.running = ["ops-w1", "ops-silent"]
    await look.look()
    assert "BulkOperation" in client.queries[0] and "Running" in client.queries[0]
    op = {"operation": "ops-w1"}
    assert _sample("trainctl_operation_state", {**op, "state": "running"}) == 1
    assert _sample("trainctl_operation_state", {**op, "state": "failed"}) == 0
    assert _sample("trainctl_operation_waves_done", {**op, "cluster": "c00"}) == 1
    assert _sample("trainctl_operation_waves_planned", {**op, "cluster": "c00"}) == 4
    hosts = {**op, "cluster": "c00"}
    assert _sample("trainctl_operation_hosts", {**hosts, "outcome": "changed"}) == 8
    assert _sample("trainctl_operation_hosts", {**hosts, "outcome": "deferred"}) == 2
    assert (
        _sample("trainctl_operation_state", {"operation": "ops-silent", "state": "running"}) is None
    )

    answers["ops-w1"] = _status("ops-w1", "failed", 2, failures=3)
    client.running = []
    await look.look()  # it has ended: its final status, once
    assert _sample("trainctl_operation_state", {**op, "state": "failed"}) == 1
    assert _sample("trainctl_operation_state", {**op, "state": "running"}) == 0
    assert _sample("trainctl_operation_hosts", {**hosts, "outcome": "failed"}) == 3
    assert "ops-w1" in look.ended
    assert look.live == {"ops-silent"}  # ended, but its final status is not read yet
    answers["ops-silent"] = _status("ops-silent", "succeeded", 4)
    await look.look()
    silent = {"operation": "ops-silent", "state": "succeeded"}
    assert _sample("trainctl_operation_state", silent) == 1
    assert not look.live
    client.running = ["ops-deleted"]
    await look.look()
    client.running = []
    await look.look()
    assert not look.live
    look.keep = 0.0
    await look.look()
    assert _sample("trainctl_operation_state", {**op, "state": "failed"}) is None
    assert _sample("trainctl_operation_state", silent) is None
    assert _sample("trainctl_operation_hosts", {**hosts, "outcome": "failed"}) is None
    assert not look.ended


async def test_operation_watch_on_a_real_operation(dev_env, tmp_home):
    """On the dev server: a running operation's waves and state reach the gauges as its
    ``status`` says, and its end (aborted here) once it has ended; the cycle series of a train
    whose workflow does not run are cleared."""
    from orchestrator.app.worker import build_worker
    from orchestrator.contracts.arbiter_types import arbiter_workflow_id
    from orchestrator.contracts.ops_types import OperationInput
    from orchestrator.ops import parse_spec_text
    from orchestrator.ops.client import control_operation, final_status, operation_handle
    from tests.e2e import op_spec
    from workflows.bulk_operation import BulkOperation

    path = make_fleet(tmp_home, 36000.0)
    queue = f"tq-{uuid.uuid4()}"
    spec = parse_spec_text(
        json.dumps(op_spec(budget={"max_unavailable": "5%"}, drain={"max_wait": "8h"}))
    )
    op = spec.operation_id
    look = watch.OperationWatch(dev_env.client)
    labels = {"operation": op, "cluster": "c00"}
    # A train another worker stopped (no train-c99 runs): its cycle series go at the next look.
    counts = CycleCounts(hosts_total=128, visited=10, due=118, fleet_hours=5.0)
    metrics.record_cycle("c99", counts, 0.0, 1.0)
    assert _sample("trainctl_cycle_off_track", {"cluster": "c99"}) == 1
    await look.look()
    assert _sample("trainctl_cycle_off_track", {"cluster": "c99"}) is None
    assert "c99" not in metrics.train_clusters()
    async with build_worker(dev_env.client, path, queue):
        try:
            await dev_env.client.start_workflow(
                BulkOperation.run, OperationInput(spec=spec), id=op, task_queue=queue
            )
            for _ in range(150):
                await look.look()
                if (_sample("trainctl_operation_waves_done", labels) or 0) >= 1:
                    break
                await asyncio.sleep(0.1)
            assert _sample("trainctl_operation_state", {"operation": op, "state": "running"}) == 1
            planned = _sample("trainctl_operation_waves_planned", labels) or 0
            assert planned >= 2, planned
            assert (_sample("trainctl_operation_hosts", {**labels, "outcome": "changed"}) or 0) > 0
            await control_operation(dev_env.client, op, "abort", "test")
            final = await asyncio.wait_for(final_status(operation_handle(dev_env.client, op)), 30)
            for _ in range(50):
                await look.look()
                if op in look.ended:
                    break
                await asyncio.sleep(0.1)
            state = {"operation": op, "state": final.state}
            assert final.state == "aborted" and _sample("trainctl_operation_state", state) == 1
            assert _sample("trainctl_operation_state", {"operation": op, "state": "running"}) == 0
        finally:
            for wid in (op, arbiter_workflow_id("c00", queue)):
                with contextlib.suppress(Exception):
                    await dev_env.client.get_workflow_handle(wid).terminate("test cleanup")
    metrics.forget_operation(op)


async def test_train_stop_clears_its_off_track_cycle(dev_env, tmp_home):
    """The issue's case on the dev server: a train behind its cycle_target reports
    ``trainctl_cycle_off_track 1``; after ``train stop`` the series is gone (no alert)."""
    from orchestrator.app.worker import build_worker
    from orchestrator.contracts.arbiter_types import arbiter_workflow_id
    from orchestrator.train.client import control_train, start_train, train_handle
    from tests.train_helpers import spec as train_spec

    path = make_fleet(tmp_home, 36000.0)
    queue = f"tq-{uuid.uuid4()}"
    c00 = {"cluster": "c00"}
    async with build_worker(dev_env.client, path, queue):
        try:
            await start_train(
                dev_env.client, train_spec(cycle_target="1m"), task_queue=queue, replace=True
            )
            for _ in range(200):
                if _sample("trainctl_cycle_off_track", c00) == 1:
                    break
                await asyncio.sleep(0.05)
            assert _sample("trainctl_cycle_off_track", c00) == 1
            await control_train(dev_env.client, "c00", "stop", "test")
            await asyncio.wait_for(train_handle(dev_env.client, "c00").result(), 60)
            assert _sample("trainctl_cycle_off_track", c00) is None
            assert _sample("trainctl_cycle_target_hours", c00) is None
            assert "c00" not in metrics.train_clusters()
        finally:
            for wid in ("train-c00", arbiter_workflow_id("c00", queue)):
                with contextlib.suppress(Exception):
                    await dev_env.client.get_workflow_handle(wid).terminate("test cleanup")
    metrics.clear_train("c00")
