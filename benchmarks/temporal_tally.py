"""Temporal Cloud's billable actions, counted from histories read back from the server and
from an interceptor on the client and worker (queries, heartbeats): the tally behind
``bench_temporal_cost.py``. Counted, as Temporal Cloud bills them:

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
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import temporalio.client
import temporalio.worker
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

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
    #: Seconds from each workflow task's start to its completion (one activation: the worker
    #: ran the workflow's code and answered), per workflow type.
    task_seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

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
        task_started: float | None = None
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
            elif et == E.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                task_started = t
            elif et == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                self.info["workflow tasks completed"] += 1
                if task_started is not None:
                    self.task_seconds[wf_type].append(t - task_started)
                    task_started = None


async def read_histories(client: Client, query: str = "") -> Tally:
    """Every run of every workflow the server lists (those ``query`` finds), continue-as-new
    chains followed."""
    tally = Tally()
    seen: set[tuple[str, str]] = set()
    ids: set[str] = set()
    todo: list[tuple[str, str, str]] = []
    async for wf in client.list_workflows(query):
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


def activations(seconds: list[float]) -> dict[str, float]:
    """Count, p99 and maximum of workflow-task durations (seconds)."""
    if not seconds:
        return {"count": 0, "p99_s": 0.0, "max_s": 0.0}
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"count": len(ordered), "p99_s": round(p99, 4), "max_s": round(ordered[-1], 4)}


def peak(times: list[float]) -> tuple[int, float]:
    """Most actions in any one wall second, and the mean over the span they cover."""
    if not times:
        return 0, 0.0
    buckets = Counter(int(t) for t in times)
    span = max(1.0, max(times) - min(times))
    return max(buckets.values()), len(times) / span
