"""Prometheus metrics of the daemon, all prefixed ``trainctl_``.

Counters are incremented by activities as things happen (visits, quarantines, evictions, failed
updates); gauges of the fleet (hosts by state, hosts in maintenance, budget in use) are read from
the fleet on each scrape by a collector, so every worker reports the same truth.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.models import HostState
from orchestrator.execution.cycle import project_cycle_end
from orchestrator.fleet.ledger_files import open_postgresql
from orchestrator.fleet.store_db import Database
from orchestrator.fleet.store_schema import hosts
from orchestrator.fleet.store_url import StoreRef, is_url
from orchestrator.telemetry.cost_metrics import CostCollector

if TYPE_CHECKING:
    from orchestrator.contracts.approvals import ApprovalGate
    from orchestrator.contracts.breaker_types import BreakerView
    from orchestrator.contracts.ops_types import OperationStatus

VISITS = Counter("trainctl_host_visits", "Hosts updated, verified and returned", ["cluster"])
CHECKS = Counter(
    "trainctl_host_checks",
    "Hosts a train's cycle reached with nothing pending: recorded as visited, never drained",
    ["cluster"],
)
QUARANTINES = Counter("trainctl_host_quarantines", "Hosts quarantined by maintenance", ["cluster"])
JOBS_INTERRUPTED = Counter("trainctl_jobs_interrupted", "Jobs evicted by maintenance", ["cluster"])
UPDATE_FAILURES = Counter(
    "trainctl_update_failures", "Failed component installs", ["cluster", "component"]
)

PIGGYBACKED = Counter(
    "trainctl_hosts_piggybacked",
    "Due hosts taken as a job's end or failure freed them (no extra interruption)",
    ["cluster"],
)
BUDGET_LIMIT = Gauge(
    "trainctl_budget_limit_hosts",
    "A train's limits as hosts: the floor (max_unavailable) and the maintenance budget",
    ["cluster", "limit"],
)
CYCLE_PROJECTED = Gauge(
    "trainctl_cycle_projected_hours",
    "Projected length of the current visit cycle at its pace so far, in fleet hours",
    ["cluster"],
)
CYCLE_TARGET = Gauge(
    "trainctl_cycle_target_hours", "The train's cycle_target, in fleet hours", ["cluster"]
)
CYCLE_OFF_TRACK = Gauge(
    "trainctl_cycle_off_track",
    "1 when the current cycle is projected to end past its cycle_target, else 0",
    ["cluster"],
)

_MAINTENANCE = HELD_STATES  # held for maintenance by a train or an operation
#: Clusters whose train set cycle series in this process (``clear_train`` forgets one).
_trains: set[str] = set()


def record_cycle(
    cluster: str,
    counts: CycleCounts,
    cycle_started_hours: float,
    target_hours: float | None,
    resting: bool = False,
) -> None:
    """Set the cycle gauges from a plan's counts (``execution.cycle.project_cycle_end``). A
    resting train is on track: every host is on its targets, none waits for a visit."""
    _trains.add(cluster)
    end, on_track = project_cycle_end(counts, cycle_started_hours, target_hours, resting)
    if end is not None:
        CYCLE_PROJECTED.labels(cluster).set(end - cycle_started_hours)
    if target_hours is not None:
        CYCLE_TARGET.labels(cluster).set(target_hours)
        CYCLE_OFF_TRACK.labels(cluster).set(1 if on_track is False else 0)


_BY_STATE = select(hosts.c.cluster, hosts.c.state, func.count()).group_by(
    hosts.c.cluster, hosts.c.state
)


class FleetCollector(Collector):
    """Reads hosts by state per cluster from the fleet file at scrape time."""

    def __init__(self, fleet_path: StoreRef) -> None:
        self.fleet_path = fleet_path

    def collect(self) -> Iterator[GaugeMetricFamily]:
        import sqlite3

        by_state = GaugeMetricFamily(
            "trainctl_hosts", "Hosts by lifecycle state", labels=["cluster", "state"]
        )
        in_maint = GaugeMetricFamily(
            "trainctl_hosts_in_maintenance",
            "Hosts held by trains or operations",
            labels=["cluster"],
        )
        out = GaugeMetricFamily(
            "trainctl_hosts_out_of_service",
            "Hosts out of service for any reason (budget in use)",
            labels=["cluster"],
        )
        if is_url(self.fleet_path) or Path(self.fleet_path).exists():
            if is_url(self.fleet_path):
                db = open_postgresql(str(self.fleet_path))
            else:
                raw = sqlite3.connect(f"file:{self.fleet_path}?mode=ro", uri=True, timeout=5)
                db = Database.sqlite(raw, str(self.fleet_path))
            try:
                rows = db.read(_BY_STATE)
            finally:
                db.close()
            maint: dict[str, int] = {}
            down: dict[str, int] = {}
            for cluster, state, n in rows:
                by_state.add_metric([cluster, state], n)
                maint[cluster] = maint.get(cluster, 0) + (n if state in _MAINTENANCE else 0)
                down[cluster] = down.get(cluster, 0) + (n if state != HostState.IN_SERVICE else 0)
            for cluster, n in maint.items():
                in_maint.add_metric([cluster], n)
                out.add_metric([cluster], down[cluster])
        yield by_state
        yield in_maint
        yield out


#: Where /metrics listens unless told otherwise: loopback, like the Temporal dev server. A
#: Prometheus in another container or host needs ``--metrics-host 0.0.0.0`` (docker-compose.yml).
DEFAULT_METRICS_HOST = "127.0.0.1"


_collector: FleetCollector | None = None
_cost_collector: CostCollector | None = None


def serve_metrics(port: int, fleet_path: StoreRef, host: str = DEFAULT_METRICS_HOST) -> Any:
    """Expose /metrics on ``host:port`` with the fleet gauges registered once per process.

    Returns the HTTP server (``shutdown()`` stops it); OSError if the address is taken.
    """
    global _collector, _cost_collector
    server = start_http_server(port, addr=host)
    if _collector is None:
        _collector = FleetCollector(fleet_path)
        REGISTRY.register(_collector)
    else:
        _collector.fleet_path = fleet_path
    if _cost_collector is None or _cost_collector.fleet_path != fleet_path:
        if _cost_collector is not None:
            REGISTRY.unregister(_cost_collector)
        _cost_collector = CostCollector(fleet_path)
        REGISTRY.register(_cost_collector)
    return server[0] if isinstance(server, tuple) else server


# ------------------------------------------------------------------------------ campaigns
# Gauges set by the campaign activities as they look (each worker reports what it last saw).
CAMPAIGN_STAGE_CHANGED = Gauge(
    "trainctl_campaign_stage_hosts_changed",
    "Hosts of a campaign stage on the campaign's targets",
    ["campaign", "stage", "cluster"],
)
CAMPAIGN_STAGE_FAILURES = Gauge(
    "trainctl_campaign_stage_failures",
    "Hosts of a campaign stage that failed (quarantined, or in repair after the change)",
    ["campaign", "stage", "cluster"],
)
CAMPAIGN_STAGE_LIMIT = Gauge(
    "trainctl_campaign_stage_failure_limit",
    "The most failures a campaign stage's gate allows now",
    ["campaign", "stage"],
)
CAMPAIGN_STATE = Gauge(
    "trainctl_campaign_state",
    "1 for a campaign's current state (running, held, paused, rolling_back, succeeded, failed, "
    "rolled_back, aborted)",
    ["campaign", "state"],
)
CAMPAIGN_HELD_ON_BLAME = Gauge(
    "trainctl_campaign_held_on_blame",
    "1 while a campaign is held (or rolling back) because blame named one of its versions",
    ["campaign"],
)
CAMPAIGN_HOSTS = Gauge(
    "trainctl_campaign_hosts",
    "Distinct hosts of a campaign by outcome (changed, quarantined, rolled_back)",
    ["campaign", "outcome"],
)
CAMPAIGN_STATES = (
    "running",
    "held",
    "waiting_for_approval",
    "paused",
    "rolling_back",
    "succeeded",
    "failed",
    "rolled_back",
    "aborted",
)


def campaign_stage(campaign: str, stage: str, cluster: str, changed: int, failed: Sized) -> None:
    """One look at a campaign stage's cluster."""
    CAMPAIGN_STAGE_CHANGED.labels(campaign, stage, cluster).set(changed)
    CAMPAIGN_STAGE_FAILURES.labels(campaign, stage, cluster).set(len(failed))


def campaign_report(
    campaign: str,
    state: str,
    stage: str,
    limit: int | None,
    hosts: dict[str, int],
    held_on_blame: bool = False,
) -> None:
    """A campaign's state and totals, as its workflow last reported them."""
    CAMPAIGN_HELD_ON_BLAME.labels(campaign).set(1 if held_on_blame else 0)
    for s in CAMPAIGN_STATES:
        CAMPAIGN_STATE.labels(campaign, s).set(1 if s == state else 0)
    if stage and limit is not None:
        CAMPAIGN_STAGE_LIMIT.labels(campaign, stage).set(limit)
    for outcome, n in hosts.items():
        CAMPAIGN_HOSTS.labels(campaign, outcome).set(n)


def campaign_gate(campaign: str, gate: str, holding: bool) -> None:
    """A campaign gate's last look: 1 while it holds the stage (a Prometheus query answering
    something, or an answer that could not be read), 0 once clear."""
    CAMPAIGN_GATE_HOLDING.labels(campaign, gate).set(1 if holding else 0)


CAMPAIGN_GATE_HOLDING = Gauge(
    "trainctl_campaign_gate_holding",
    "1 while a campaign's gate (gate=prometheus) holds its stage at its last look, else 0",
    ["campaign", "gate"],
)


# ------------------------------------------------------------------------------ approvals
APPROVALS_WAITING = Gauge(
    "trainctl_approvals_waiting",
    "1 while an approval gate of a campaign or an operation waits for a listed approver "
    "(stage empty: the operation's start)",
    ["workflow", "stage", "gate"],
)
APPROVAL_WAITING_SINCE = Gauge(
    "trainctl_approval_waiting_since_seconds",
    "Unix time at which a waiting approval gate began to wait",
    ["workflow", "stage", "gate"],
)
_approval_labels: dict[str, set[tuple[str, str]]] = {}  # workflow -> (stage, gate) exported


def approvals_report(workflow_id: str, waiting: list[ApprovalGate]) -> None:
    """The approval gates of ``workflow_id`` that wait now; the others' series go."""
    now = {(g.stage, g.gate): g for g in waiting}
    for stage, gate in _approval_labels.get(workflow_id, set()) - set(now):
        _remove(APPROVALS_WAITING, workflow_id, stage, gate)
        _remove(APPROVAL_WAITING_SINCE, workflow_id, stage, gate)
    for (stage, gate), g in now.items():
        APPROVALS_WAITING.labels(workflow_id, stage, gate).set(1)
        APPROVAL_WAITING_SINCE.labels(workflow_id, stage, gate).set(g.since.timestamp())
    _approval_labels[workflow_id] = set(now)


# ------------------------------------------------------------------------------ breakers
BREAKER_OPEN = Gauge(
    "trainctl_breaker_open",
    "1 while a cluster's circuit breaker is open (its trains and operations paused), else 0",
    ["cluster"],
)
BREAKER_FAILURES = Gauge(
    "trainctl_breaker_failures_in_window",
    "Hosts of a cluster quarantined or failing verification within its breaker's window",
    ["cluster"],
)


def breaker_report(view: BreakerView) -> None:
    """A cluster's breaker as the worker's watch (or a reset) last read it."""
    BREAKER_OPEN.labels(view.cluster).set(1 if view.state == "open" else 0)
    BREAKER_FAILURES.labels(view.cluster).set(view.failures_in_window)


# ------------------------------------------------------------------------------ trains
def clear_train(cluster: str) -> None:
    """A train has stopped: its cycle and budget series go (a stopped train is on no track and
    enforces no budget), so no alert fires for it. A new train sets them at its first plan.

    ``close_owner`` calls it on the worker that closes the train; the operations' watch calls it
    on every other worker serving /metrics once it sees the train's workflow ended."""
    _trains.discard(cluster)
    for gauge in (CYCLE_PROJECTED, CYCLE_TARGET, CYCLE_OFF_TRACK):
        _remove(gauge, cluster)
    for limit in ("max_unavailable", "maintenance"):
        _remove(BUDGET_LIMIT, cluster, limit)


def train_clusters() -> set[str]:
    """Clusters whose train's cycle series this process exports."""
    return set(_trains)


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never set in this process
        gauge.remove(*labels)


# ------------------------------------------------------------------------------ operations
# Gauges of bulk operations, set from each operation's ``status`` (what ``ops status`` prints)
# by the worker's watch (``orchestrator.app.ops_watch``), per cluster of the operation.
OPERATION_STATE = Gauge(
    "trainctl_operation_state",
    "1 for a bulk operation's current state (running, waiting_for_room, paused, aborting, "
    "succeeded, failed, aborted)",
    ["operation", "state"],
)
OPERATION_WAVES_PLANNED = Gauge(
    "trainctl_operation_waves_planned",
    "Waves a bulk operation plans on a cluster (done and left)",
    ["operation", "cluster"],
)
OPERATION_WAVES_DONE = Gauge(
    "trainctl_operation_waves_done",
    "Waves of a bulk operation done on a cluster",
    ["operation", "cluster"],
)
OPERATION_HOSTS = Gauge(
    "trainctl_operation_hosts",
    "Hosts of a bulk operation on a cluster by outcome: in_scope, changed, failed (verification "
    "failures counted against max_failures), quarantined, rolled_back, deferred (out for repair)",
    ["operation", "cluster", "outcome"],
)
OPERATION_STATES = (
    "waiting_for_approval",
    "running",
    "waiting_for_room",
    "paused",
    "aborting",
    "succeeded",
    "failed",
    "aborted",
)
OPERATION_OUTCOMES = ("in_scope", "changed", "failed", "quarantined", "rolled_back", "deferred")
_op_labels: dict[str, tuple[set[str], set[str]]] = {}  # operation -> (states, clusters) set


def operation_report(status: OperationStatus) -> None:
    """An ``OperationStatus`` into the ``trainctl_operation_*`` gauges."""
    op = status.operation_id
    approvals_report(op, [g for g in status.approvals if g.state == "waiting"])
    states, clusters = _op_labels.setdefault(op, (set(), set()))
    states.update(OPERATION_STATES)
    states.add(status.state)
    for s in states:
        OPERATION_STATE.labels(op, s).set(1 if s == status.state else 0)
    for name, c in status.clusters.items():
        clusters.add(name)
        OPERATION_WAVES_PLANNED.labels(op, name).set(c.waves_total)
        OPERATION_WAVES_DONE.labels(op, name).set(c.waves_done)
        figures = {
            "in_scope": c.hosts_in_scope,
            "changed": c.hosts_changed,
            "failed": c.failures,
            "quarantined": c.hosts_quarantined,
            "rolled_back": c.hosts_rolled_back,
            "deferred": c.hosts_deferred,
        }
        for outcome, n in figures.items():
            OPERATION_HOSTS.labels(op, name, outcome).set(n)


def forget_operation(op: str) -> None:
    """Remove every series of an operation (it ended a while ago)."""
    approvals_report(op, [])
    states, clusters = _op_labels.pop(op, (set(), set()))
    for s in states:
        _remove(OPERATION_STATE, op, s)
    for name in clusters:
        _remove(OPERATION_WAVES_PLANNED, op, name)
        _remove(OPERATION_WAVES_DONE, op, name)
        for outcome in OPERATION_OUTCOMES:
            _remove(OPERATION_HOSTS, op, name, outcome)


def exported_names(registry: Any = REGISTRY) -> set[str]:
    """Every series name ``registry`` exports (a counter's ``_total`` and ``_created`` too),
    with the fleet collector's as ``serve_metrics`` registers it."""
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    text = generate_latest(registry).decode()
    if registry is REGISTRY and _collector is None:  # the fleet gauges come with serve_metrics
        extra = CollectorRegistry()
        extra.register(FleetCollector(Path("/nonexistent/fleet.db")))
        extra.register(CostCollector(Path("/nonexistent/fleet.db")))
        text += generate_latest(extra).decode()
    types = [line.split(" ") for line in text.splitlines() if line.startswith("# TYPE ")]
    names = {t[2] for t in types} | {f"{t[2]}_total" for t in types if t[3] == "counter"}
    samples = {
        line.split("{", 1)[0].split(" ", 1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    return names | samples
