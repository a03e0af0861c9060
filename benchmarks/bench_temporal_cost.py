"""Temporal cost of the train and of a bulk operation: billable actions and history events per host.

Each scenario gets its own dev server (started by this script), a fleet at ``--speed max`` in a
temporary directory and a worker (``orchestrator.app.worker.build_worker``, the product's own):

* ``small``: one train cycle of ``small`` (128 hosts), domain 8, the demo's budget (10%);
* ``meta``: one train cycle of ``meta-24k`` (3,072 hosts), budget 3%, domain 92;
* ``cuda``: one CUDA operation over ``meta-24k``: ``examples/cuda.yaml`` (cuda-upgrade, job
  consistency, budget 25%, drain 2h) with its ``max_failures: 3`` left to the bad-build rule, as
  the README's plain cuda-upgrade over meta-24k (with 3 it stops at its first wave there; pass
  ``--cuda-max-failures 3`` to measure that).

The trains are specs of ``trainctl demo --until-cycle-complete`` (its targets, drain and halt
rule); the operation is started and waited for as ``trainctl ops start --wait`` does. When the
scenario has ended (or its ``--timeout`` passed: the train is asked to stop, the figures are then
partial and say so) the worker stops, and every workflow the server knows is listed, each run's
history fetched (continue-as-new runs followed) and its events counted as Temporal Cloud bills
them:

* workflow starts (by a client; a child's start is counted once, in its parent) and
  continue-as-new runs; child workflow starts;
* activity tasks scheduled, and their retries (``attempt - 1`` of each ActivityTaskStarted);
* timers started (the cancelled ones are shown as well, they cost the same);
* signals received, and signals sent to other workflows (both are billed);
* updates accepted; search-attribute upserts; memo changes (WorkflowPropertiesModified);
* markers: local activities, version markers (``workflow.patched``), side effects.

What no history shows comes from an interceptor on the worker's client (``temporalio.client``
and ``temporalio.worker`` at once, so the worker picks it up): queries, signals and updates the
activities and the script send, and activity heartbeats. Heartbeats are throttled by the SDK
before they reach the server (one per window of 0.8 x the heartbeat timeout, at most 60 s, 30 s
without a timeout): the calls are shown, and the sends estimated from their times are billed.

The peak actions per second buckets every billable event's time (history event times, the
interceptor's wall times) per second. The projection for ``meta-600k`` is 25 trains of
``meta-24k`` size at that same peak at once, against the 500 actions/s a namespace is allowed by
default; at real fleet time the rate is the actions over the cycle's fleet-seconds.

    nice python benchmarks/bench_temporal_cost.py                        # all three, ~7 min
    nice python benchmarks/bench_temporal_cost.py --scenarios small      # about 30 s
    nice python benchmarks/bench_temporal_cost.py --scenarios meta,cuda --json

Outside CI; a measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import temporalio.client
import temporalio.worker
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.demo import demo_spec
from orchestrator.app.worker import build_worker, heartbeat
from orchestrator.contracts.ops_spec import load_spec, operation_id
from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import resolve_clusters
from orchestrator.ops.client import operation_status, start_operation
from orchestrator.train.client import control_train, start_train, train_result

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE_LIMIT = 500  # actions per second a Temporal Cloud namespace is allowed by default
MEGA_TRAINS = 25  # meta-600k: 25 clusters of meta-24k size, one train each

# Action kinds, in the order the table prints them.
KINDS = (
    "workflow starts",
    "continue-as-new",
    "child workflow starts",
    "activities scheduled",
    "activity retries",
    "timers started",
    "signals received",
    "signals sent (external)",
    "updates accepted",
    "search-attribute upserts",
    "memo changes",
    "markers: local activity",
    "markers: version",
    "markers: side effect",
    "markers: other",
    "queries (client)",
    "activity heartbeats (sent, est.)",
)

MARKERS = {
    "core_local_activity": "markers: local activity",
    "LocalActivity": "markers: local activity",
    "core_patch": "markers: version",
    "Version": "markers: version",
    "SideEffect": "markers: side effect",
    "MutableSideEffect": "markers: side effect",
}

E = EventType


# --------------------------------------------------------------------------- interceptor


@dataclass
class _Beats:
    interval: float
    times: list[float] = field(default_factory=list)


class Meter(temporalio.client.Interceptor, temporalio.worker.Interceptor):
    """Counts what reaches the server but no history records: client queries (and, for
    comparison, client signals, updates and starts, which histories do show) and activity
    heartbeats, each with its wall time for the per-second peak."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.times: dict[str, list[float]] = defaultdict(list)
        self.beats: dict[bytes, _Beats] = {}
        self.beats_by_activity: Counter[str] = Counter()

    def note(self, kind: str) -> None:
        with self.lock:
            self.calls[kind] += 1
            self.times[kind].append(time.time())

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.times.clear()
            self.beats.clear()
            self.beats_by_activity.clear()

    def intercept_client(
        self, next: temporalio.client.OutboundInterceptor
    ) -> temporalio.client.OutboundInterceptor:
        return _ClientOut(next, self)

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        return _ActivityIn(next, self)

    def heartbeat(self, info: Any) -> None:
        """One heartbeat call of the activity attempt ``info``."""
        now = time.time()
        timeout = info.heartbeat_timeout
        interval = min(0.8 * timeout.total_seconds(), 60.0) if timeout else 30.0
        with self.lock:
            self.calls["activity heartbeats (calls)"] += 1
            self.beats_by_activity[info.activity_type] += 1
            self.beats.setdefault(info.task_token, _Beats(interval)).times.append(now)

    def heartbeat_sends(self) -> list[float]:
        """The times of the heartbeats the SDK would send: the first of an attempt at once,
        then at most one per throttle window (a pending one dropped when the attempt ends)."""
        sent = []
        with self.lock:
            for b in self.beats.values():
                t0 = b.times[0]
                seen: set[int] = set()
                for t in b.times:
                    w = int((t - t0) // b.interval) if b.interval > 0 else len(seen)
                    if w not in seen:
                        seen.add(w)
                        sent.append(t0 + w * b.interval)
        return sent


class _ClientOut(temporalio.client.OutboundInterceptor):
    def __init__(self, next: temporalio.client.OutboundInterceptor, meter: Meter) -> None:
        super().__init__(next)
        self.meter = meter

    async def query_workflow(self, input: temporalio.client.QueryWorkflowInput) -> Any:
        self.meter.note("queries (client)")
        return await super().query_workflow(input)

    async def signal_workflow(self, input: temporalio.client.SignalWorkflowInput) -> None:
        self.meter.note("signals (client)")
        await super().signal_workflow(input)

    async def start_workflow(
        self, input: temporalio.client.StartWorkflowInput
    ) -> temporalio.client.WorkflowHandle[Any, Any]:
        self.meter.note("signal-with-start (client)" if input.start_signal else "starts (client)")
        return await super().start_workflow(input)

    async def start_workflow_update(
        self, input: temporalio.client.StartWorkflowUpdateInput
    ) -> temporalio.client.WorkflowUpdateHandle[Any]:
        self.meter.note("updates sent (client)")
        return await super().start_workflow_update(input)

    async def start_update_with_start_workflow(
        self, input: temporalio.client.StartWorkflowUpdateWithStartInput
    ) -> temporalio.client.WorkflowUpdateHandle[Any]:
        self.meter.note("update-with-start (client)")
        return await super().start_update_with_start_workflow(input)


class _ActivityIn(temporalio.worker.ActivityInboundInterceptor):
    def __init__(self, next: temporalio.worker.ActivityInboundInterceptor, meter: Meter) -> None:
        super().__init__(next)
        self.meter = meter

    def init(self, outbound: temporalio.worker.ActivityOutboundInterceptor) -> None:
        super().init(_ActivityOut(outbound, self.meter))


class _ActivityOut(temporalio.worker.ActivityOutboundInterceptor):
    def __init__(self, next: temporalio.worker.ActivityOutboundInterceptor, meter: Meter) -> None:
        super().__init__(next)
        self.meter = meter

    def heartbeat(self, *details: Any) -> None:
        self.meter.heartbeat(self.info())
        super().heartbeat(*details)


# --------------------------------------------------------------------------- histories


@dataclass
class Tally:
    """Billable actions and events of every history read, and the times of the actions."""

    actions: Counter[str] = field(default_factory=Counter)
    by_type: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    events_by_type: Counter[str] = field(default_factory=Counter)
    runs_by_type: Counter[str] = field(default_factory=Counter)
    activities_by_name: Counter[str] = field(default_factory=Counter)
    info: Counter[str] = field(default_factory=Counter)
    times: list[float] = field(default_factory=list)
    events: int = 0
    runs: int = 0
    workflows: int = 0
    largest_run: int = 0

    def act(self, wf_type: str, kind: str, when: float, n: int = 1) -> None:
        self.actions[kind] += n
        self.by_type[wf_type][kind] += n
        self.times.extend([when] * n)

    def read(self, wf_type: str, events: list[HistoryEvent]) -> None:
        """Count one run's history."""
        self.runs += 1
        self.runs_by_type[wf_type] += 1
        self.events += len(events)
        self.events_by_type[wf_type] += len(events)
        self.largest_run = max(self.largest_run, len(events))
        for ev in events:
            t = ev.event_time.ToDatetime().timestamp()
            et = ev.event_type
            if et == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                a = ev.workflow_execution_started_event_attributes
                if a.continued_execution_run_id:
                    self.act(wf_type, "continue-as-new", t)
                elif not a.HasField("parent_workflow_execution"):
                    self.act(wf_type, "workflow starts", t)
            elif et == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                self.act(wf_type, "child workflow starts", t)
            elif et == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                self.act(wf_type, "activities scheduled", t)
                name = ev.activity_task_scheduled_event_attributes.activity_type.name
                self.activities_by_name[f"{wf_type}/{name}"] += 1
            elif et == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                attempt = ev.activity_task_started_event_attributes.attempt
                if attempt > 1:
                    self.act(wf_type, "activity retries", t, attempt - 1)
            elif et == E.EVENT_TYPE_TIMER_STARTED:
                self.act(wf_type, "timers started", t)
            elif et == E.EVENT_TYPE_TIMER_CANCELED:
                self.info["timers cancelled"] += 1
                self.info[f"timers cancelled: {wf_type}"] += 1
            elif et == E.EVENT_TYPE_TIMER_FIRED:
                self.info["timers fired"] += 1
            elif et == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                self.act(wf_type, "signals received", t)
                name = ev.workflow_execution_signaled_event_attributes.signal_name
                self.info[f"signal received: {wf_type}/{name}"] += 1
            elif et == E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
                self.act(wf_type, "signals sent (external)", t)
                name = ev.signal_external_workflow_execution_initiated_event_attributes.signal_name
                self.info[f"signal sent: {wf_type}/{name}"] += 1
            elif et == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                self.act(wf_type, "updates accepted", t)
                req = ev.workflow_execution_update_accepted_event_attributes.accepted_request
                name = req.input.name
                self.info[f"update accepted: {wf_type}/{name}"] += 1
            elif et == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
                self.act(wf_type, "search-attribute upserts", t)
            elif et == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
                self.act(wf_type, "memo changes", t)
            elif et == E.EVENT_TYPE_MARKER_RECORDED:
                name = ev.marker_recorded_event_attributes.marker_name
                self.act(wf_type, MARKERS.get(name, "markers: other"), t)
            elif et == E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
                self.info["cancel requests sent (external)"] += 1
            elif et == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                self.info["workflow tasks completed"] += 1


async def read_histories(client: Client) -> Tally:
    """Every run of every workflow the server lists, continue-as-new chains followed."""
    tally = Tally()
    seen: set[tuple[str, str]] = set()
    ids: set[str] = set()
    todo: list[tuple[str, str, str]] = []
    async for wf in client.list_workflows(""):
        todo.append((wf.id, wf.run_id, wf.workflow_type))
    while todo:
        wid, rid, wtype = todo.pop()
        if (wid, rid) in seen:
            continue
        seen.add((wid, rid))
        ids.add(wid)
        history = await client.get_workflow_handle(wid, run_id=rid).fetch_history()
        events = list(history.events)
        tally.read(wtype, events)
        if events and events[-1].event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            a = events[-1].workflow_execution_continued_as_new_event_attributes
            todo.append((wid, a.new_execution_run_id, wtype))
        if events and events[0].event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            prev = events[0].workflow_execution_started_event_attributes.continued_execution_run_id
            if prev:
                todo.append((wid, prev, wtype))
    tally.workflows = len(ids)
    return tally


# --------------------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    name: str
    preset: str
    title: str
    per: str  # what the actions are divided by
    run: Callable[[Client, Path, str, float], Awaitable[dict[str, Any]]]


async def run_train(
    client: Client, path: Path, tq: str, timeout: float, preset: str, domain: int, budget: str
) -> dict[str, Any]:
    spec = demo_spec(preset, domain, budget, until_cycle=True)
    await start_train(client, spec, task_queue=tq, replace=True)
    timed_out = False
    t0 = time.perf_counter()
    try:
        status = await asyncio.wait_for(train_result(client, spec.cluster), timeout)
    except TimeoutError:
        timed_out = True
        await control_train(client, spec.cluster, "stop", "benchmark timeout")
        status = await asyncio.wait_for(train_result(client, spec.cluster), 120)
    wall = time.perf_counter() - t0
    return {
        "state": status.state,
        "reason": status.reason,
        "timed_out": timed_out,
        "wall_s": round(wall, 1),
        "hosts_total": status.hosts_total,
        "hosts_visited": status.hosts_visited_this_cycle,
        "hosts_quarantined": status.quarantined + status.in_repair,
        "visits": status.visits_total or status.hosts_visited_this_cycle,
        "cycle_fleet_hours": round(status.last_cycle_fleet_hours or status.fleet_hours, 3),
        "job_interruptions": status.jobs_interrupted,
        "lost_gpu_hours": round(status.lost_gpu_hours, 3),
    }


#: ``max_failures`` of the CUDA operation: None leaves it to the bad-build rule (as the README's
#: plain cuda-upgrade over meta-24k); examples/cuda.yaml's own 3 stops it at its first wave there.
CUDA_MAX_FAILURES: list[int | None] = [None]


async def run_cuda(client: Client, path: Path, tq: str, timeout: float) -> dict[str, Any]:
    spec = load_spec(ROOT / "examples" / "cuda.yaml").model_copy(
        update={"max_failures": CUDA_MAX_FAILURES[0]}
    )
    fleet = SqliteFleet(path)
    try:
        clusters = resolve_clusters(spec.scope, fleet.cluster_names())
        t0 = time.perf_counter()
        hours0 = fleet.fleet_time(cluster=clusters[0])
    finally:
        fleet.close()
    timed_out = False
    try:
        start = await asyncio.wait_for(
            start_operation(client, spec, clusters=clusters, task_queue=tq, wait=True), timeout
        )
        status = start.status
    except TimeoutError:  # where it stands; it stops with the worker
        timed_out = True
        status = await operation_status(client, operation_id(spec))
    wall = time.perf_counter() - t0
    assert status is not None
    fleet = SqliteFleet(path)
    try:
        hours = fleet.fleet_time(cluster=clusters[0]) - hours0
    finally:
        fleet.close()
    return {
        "state": status.state,
        "reason": status.reason,
        "max_failures": spec.max_failures,
        "timed_out": timed_out,
        "wall_s": round(wall, 1),
        "hosts_changed": status.hosts_changed,
        "hosts_quarantined": status.hosts_quarantined,
        "waves": status.waves_done,
        "visits": status.hosts_changed,
        "cycle_fleet_hours": round(hours, 3),
        "job_interruptions": status.jobs_interrupted,
    }


SCENARIOS = {
    "small": Scenario(
        "small",
        "small",
        "train cycle, small, domain 8, budget 10%",
        "host visit",
        lambda c, p, tq, to: run_train(c, p, tq, to, "small", 8, "10%"),
    ),
    "meta": Scenario(
        "meta",
        "meta-24k",
        "train cycle, meta-24k, domain 92, budget 3%",
        "host visit",
        lambda c, p, tq, to: run_train(c, p, tq, to, "meta-24k", 92, "3%"),
    ),
    "cuda": Scenario(
        "cuda",
        "meta-24k",
        "cuda-upgrade (examples/cuda.yaml) over meta-24k",
        "host changed",
        run_cuda,
    ),
}


def peak(times: list[float]) -> tuple[int, float]:
    """Most actions in any one wall second, and the mean over the span they cover."""
    if not times:
        return 0, 0.0
    buckets = Counter(int(t) for t in times)
    span = max(1.0, max(times) - min(times))
    return max(buckets.values()), len(times) / span


async def bench_one(sc: Scenario, seed: int, timeout: float) -> dict[str, Any]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),
    )
    meter = Meter()
    try:
        target = env.client.service_client.config.target_host
        client = await Client.connect(
            target,
            namespace=env.client.namespace,
            data_converter=pydantic_data_converter,
            interceptors=[meter],
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "fleet.db"
            SqliteFleet.create(path, get_preset(sc.preset), seed, MAX_SPEED).close()
            tq = f"cost-{uuid.uuid4().hex[:6]}"
            async with heartbeat(path), build_worker(client, path, tq):
                out = await sc.run(client, path, tq, timeout)
            calls = dict(meter.calls)
            sends = meter.heartbeat_sends()
            query_times = list(meter.times.get("queries (client)", []))
            beats_by_activity = dict(meter.beats_by_activity.most_common())
            await asyncio.sleep(1.0)  # visibility is eventually consistent
            tally = await read_histories(env.client)
    finally:
        await env.shutdown()
    tally.actions["queries (client)"] += len(query_times)
    tally.actions["activity heartbeats (sent, est.)"] += len(sends)
    tally.times.extend(query_times)
    tally.times.extend(sends)
    total = sum(tally.actions.values())
    per = max(1, out["visits"])
    top, mean = peak(tally.times)
    fleet_s = out["cycle_fleet_hours"] * 3600
    realtime = total / fleet_s if fleet_s > 0 else None
    return {
        "scenario": sc.name,
        "title": sc.title,
        "per": sc.per,
        **out,
        "workflows": tally.workflows,
        "runs": tally.runs,
        "largest_run_events": tally.largest_run,
        "history_events": tally.events,
        "events_per": round(tally.events / per, 2),
        "actions": {k: tally.actions.get(k, 0) for k in KINDS},
        "actions_total": total,
        "actions_per": round(total / per, 3),
        "peak_actions_per_s": top,
        "mean_actions_per_s": round(mean, 1),
        "meta_600k_peak_actions_per_s": top * MEGA_TRAINS,
        "meta_600k_mean_actions_per_s": round(mean * MEGA_TRAINS, 1),
        "meta_600k_realtime_actions_per_s": (
            round(realtime * MEGA_TRAINS, 3) if realtime is not None else None
        ),
        "namespace_limit": NAMESPACE_LIMIT,
        "client_calls": calls,
        "heartbeats_by_activity": beats_by_activity,
        "actions_by_workflow_type": {
            wt: {"total": sum(c.values()), **dict(c.most_common())}
            for wt, c in sorted(tally.by_type.items(), key=lambda kv: -sum(kv[1].values()))
        },
        "runs_by_workflow_type": dict(tally.runs_by_type.most_common()),
        "events_by_workflow_type": dict(tally.events_by_type.most_common()),
        "activities_by_name": dict(tally.activities_by_name.most_common()),
        "info": dict(sorted(tally.info.items())),
    }


# --------------------------------------------------------------------------- output


def table(results: list[dict[str, Any]]) -> str:
    names = [r["scenario"] for r in results]
    w = 34
    col = 12

    def row(label: str, values: list[Any]) -> str:
        return f"{label:<{w}}" + "".join(f"{v!s:>{col}}" for v in values)

    lines = [row("", names), "-" * (w + col * len(names))]
    lines.append(row("state", [r["state"] + ("*" if r["timed_out"] else "") for r in results]))
    lines.append(row("wall s", [r["wall_s"] for r in results]))
    lines.append(row("visits (train) / changed (op)", [r["visits"] for r in results]))
    lines.append(row("workflows / runs", [f"{r['workflows']}/{r['runs']}" for r in results]))
    for kind in KINDS:
        lines.append(row("  " + kind, [r["actions"][kind] for r in results]))
    lines.append(row("billable actions", [r["actions_total"] for r in results]))
    lines.append(row("  per host visit / changed", [r["actions_per"] for r in results]))
    lines.append(row("history events", [r["history_events"] for r in results]))
    lines.append(row("  per host visit / changed", [r["events_per"] for r in results]))
    lines.append(row("largest run, events", [r["largest_run_events"] for r in results]))
    lines.append(row("timers cancelled", [r["info"].get("timers cancelled", 0) for r in results]))
    lines.append(
        row(
            "heartbeat calls",
            [r["client_calls"].get("activity heartbeats (calls)", 0) for r in results],
        )
    )
    lines.append(row("peak actions/s (1 s buckets)", [r["peak_actions_per_s"] for r in results]))
    lines.append(row("mean actions/s", [r["mean_actions_per_s"] for r in results]))
    lines.append(
        row(
            f"x{MEGA_TRAINS} (meta-600k) peak/s",
            [r["meta_600k_peak_actions_per_s"] for r in results],
        )
    )
    lines.append(
        row(
            f"x{MEGA_TRAINS} (meta-600k) real time/s",
            [r["meta_600k_realtime_actions_per_s"] for r in results],
        )
    )
    lines.append("")
    for r in results:
        verdict = "under" if r["meta_600k_peak_actions_per_s"] <= NAMESPACE_LIMIT else "OVER"
        lines.append(
            f"{r['scenario']}: {r['title']}: {r['actions_total']:,} actions, "
            f"{r['actions_per']} per {r['per']}; {MEGA_TRAINS} at its peak "
            f"{r['meta_600k_peak_actions_per_s']:,}/s, {verdict} the {NAMESPACE_LIMIT}/s "
            "of a namespace (at --speed max; the real-time rate is the row above)"
        )
        if r["state"] not in ("stopped", "succeeded") or r["timed_out"]:
            lines.append(f"  ended {r['state']}: {r.get('reason', '')}")
        by_type = ", ".join(f"{wt} {c['total']}" for wt, c in r["actions_by_workflow_type"].items())
        lines.append(f"  actions by workflow type: {by_type}")
        acts = ", ".join(f"{k} {v}" for k, v in list(r["activities_by_name"].items())[:8])
        lines.append(f"  most scheduled activities: {acts}")
        children = r["actions"]["child workflow starts"]
        if children:
            lines.append(
                f"  per child workflow (domain or cluster, {children}): "
                f"{r['actions_total'] / children:.1f} actions, "
                f"{r['history_events'] / children:.1f} events"
            )
        timers = ", ".join(
            f"{wt} {c.get('timers started', 0)}/{r['info'].get(f'timers cancelled: {wt}', 0)}"
            for wt, c in r["actions_by_workflow_type"].items()
        )
        lines.append(f"  timers started/cancelled: {timers}")
        msgs = ", ".join(
            f"{k} {v}"
            for k, v in sorted(r["info"].items(), key=lambda kv: -kv[1])
            if k.startswith(("signal ", "update "))
        )
        lines.append(f"  messages: {msgs}")
    if any(r["timed_out"] for r in results):
        lines.append("* timed out: the train was asked to stop; figures are partial")
    return "\n".join(lines)


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for name in args.scenarios.split(","):
        sc = SCENARIOS[name.strip()]
        print(f"running {sc.name}: {sc.title} ...", file=sys.stderr, flush=True)
        r = await bench_one(sc, args.seed, args.timeout)
        print(
            f"  {sc.name}: {r['state']} in {r['wall_s']} s, {r['actions_total']} actions",
            file=sys.stderr,
            flush=True,
        )
        out.append(r)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenarios", default="small,meta,cuda", help="comma-separated: small, meta, cuda"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds per scenario before it is stopped"
    )
    parser.add_argument(
        "--cuda-max-failures",
        type=int,
        default=None,
        help="the CUDA operation's max_failures (default: none, the bad-build rule decides; "
        "examples/cuda.yaml says 3, which stops it at its first wave on meta-24k)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    CUDA_MAX_FAILURES[0] = args.cuda_max_failures
    for name in args.scenarios.split(","):
        if name.strip() not in SCENARIOS:
            parser.error(f"--scenarios: unknown {name!r} (small, meta, cuda)")
    stdout = os.dup(1)
    os.dup2(2, 1)  # the dev server prints its banner on the stdout it inherits: keep ours clean
    try:
        results = asyncio.run(bench(args))
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
    if args.json:
        print(json.dumps({"scenarios": results}))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
