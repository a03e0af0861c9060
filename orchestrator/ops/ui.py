"""What the Temporal UI shows for a bulk operation, each cluster of it, and its wave in progress.

The operation's page answers "how far, which clusters, what failed"; a cluster's page answers
"which wave, what does it wait for, and per host of the wave: phase and the job it waits for".
Waves are numbered from 1 everywhere (plans, progress, failures). Markdown from
:mod:`orchestrator.contracts.ui_text`, bounded for ``meta-24k`` waves; pure functions the workflows
call.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.ops_types import ClusterProgress, OperationStatus
from orchestrator.contracts.ui_text import (
    bounded,
    cost_item,
    duration,
    explain_wait,
    host_list,
    item_list,
    md_plain,
    names,
    one_line,
    plural,
    tally,
    versions,
)

_WORDS = {
    "pending": "Not started",
    "planning": "Planning",
    "prestaging": "Pre-staging packages",
    "waiting": "Waiting",
    "waiting_for_room": "Waiting for room",
    "draining": "Draining",
    "updating": "Changing",
    "verifying": "Verifying",
    "rolling_back": "Rolling back",
    "paused": "Paused",
    "aborting": "Aborting",
    "running": "Running",
    "waiting_for_approval": "Waiting for approval",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "aborted": "Aborted",
}


def state_word(state: str) -> str:
    return _WORDS.get(state, state.capitalize())


def operation_summary(kind: str, targets: Mapping[str, str], where: str) -> str:
    """``cuda-upgrade to cuda 12.4, gpu_driver 550.54 over c00``."""
    change = f" to {versions(targets)}" if targets else ""
    return one_line(md_plain(f"{kind}{change} over {where}"))


def room_wait_text(why: str, left: float, most: float, readable: bool = True) -> str:
    """A cluster's wait for room as its page and ``ops status`` show it: the budget's holders
    (``why``), then at most ``left`` more of the ``most`` fleet hours ``max_wait_for_room``
    allows, as durations people read (``2 min``, ``1 h 30 min``). ``readable=False`` words it
    as runs recorded before the ``ops-room-wait-text`` patch did (hours as decimals): the text
    is part of the progress the workflow signals its parent when it changes."""
    if not readable:
        return f"{why}; waits for room, at most {left:.1f} h more (max_wait_for_room {most:g} h)"
    return (
        f"{why}; waits for room, at most {duration(left)} more (max_wait_for_room {duration(most)})"
    )


def no_room_text(why: str, most: float, readable: bool = True) -> str:
    """Why a cluster failed after waiting ``most`` fleet hours for room (``readable``: as in
    ``room_wait_text``)."""
    within = duration(most) if readable else f"{most:g} h"
    return f"{why}: no room within max_wait_for_room ({within})"


def cluster_summary(kind: str, targets: Mapping[str, str], cluster: str) -> str:
    """A cluster child's summary in the operation's history."""
    change = f" to {versions(targets)}" if targets else ""
    return one_line(f"{kind}{change} on {cluster}: waves of drain, change, verify")


def _progress(p: ClusterProgress) -> str:
    wave = f"wave {p.waves_done + 1} of {p.waves_total}" if p.wave_hosts else ""
    done = f"{p.waves_done}/{p.waves_total} waves done"
    return f"{done}{', ' + wave + ' in progress' if wave else ''}"


def _failure_limit(spec: OperationSpec, p: ClusterProgress) -> str:
    """``max_failures`` as set, or the bad-build rule's threshold for the hosts changed so far."""
    if spec.max_failures is not None:
        return str(spec.max_failures)
    return (
        f"{p.gate_threshold} of {p.gate_changed:,} changed hosts, the bad-build rule at base "
        f"rate {p.base_rate:.2%}; {p.hosts_failing_before} failing before their change"
    )


def cluster_details(
    spec: OperationSpec,
    operation_id: str,
    p: ClusterProgress,
    wave: Mapping[str, tuple[str, str]],
) -> str:
    """A cluster page's current details: where the cluster stands, then the wave's hosts."""
    head = f"**{state_word(p.state)}** · {operation_summary(spec.kind, spec.targets, p.cluster)}"
    if p.reason:
        head += f" — {md_plain(explain_wait(p.reason))}"
    lines = [
        head,
        "",
        f"- **Progress:** {_progress(p)}; {p.hosts_changed:,} of {p.hosts_in_scope:,} hosts "
        f"in scope changed ({p.already_done:,} already on target)",
        f"- **Failures:** {p.failures} (the operation stops and rolls its wave back past "
        f"{_failure_limit(spec, p)}); {p.hosts_rolled_back:,} rolled back, "
        f"{p.hosts_quarantined:,} quarantined, {p.hosts_deferred:,} deferred (in repair: "
        "they take the change before they return)",
        f"- **Jobs interrupted:** {p.jobs_interrupted}",
        *cost_item(p.cost),
    ]
    if p.waiting_for:
        lines.append(f"- **Waiting for:** {names(p.waiting_for)} to hand the cluster over")
    if wave:
        lines += [
            "",
            f"**{f'Wave {p.waves_done + 1}' if p.wave_hosts else f'Last wave ({p.waves_done})'}"
            f"** ({plural(len(wave), 'host')}): "
            f"{tally(ph for ph, _ in wave.values())}",
            "",
        ]
        order = {"draining": 0, "evicting": 1, "changing": 2, "verifying": 3}
        rows = sorted(wave.items(), key=lambda kv: (order.get(kv[1][0], 9), kv[0]))
        lines += host_list((h, a, b) for h, (a, b) in rows)
    lines += ["", f"_operation {operation_id}_"]
    return bounded("\n".join(lines))


def _cost_total(st: OperationStatus) -> list[str]:
    """The operation's cost to jobs over its clusters (each cluster's page has its parts)."""
    costs = [c.cost for c in st.clusters.values() if c.cost is not None]
    if not costs:
        return []
    total = sum(c.total_gpu_hours for c in costs)
    stopped = sum(c.jobs_stopped for c in costs)
    return [f"- **Cost to jobs:** {total:,.1f} GPU-h; {stopped:,} job(s) stopped"]


def operation_details(st: OperationStatus) -> str:
    """The operation page's current details: totals, then one row per cluster."""
    change = f" to {versions(st.targets)}" if st.targets else ""
    head = f"**{state_word(st.state)}** · {st.kind}{change}"
    if st.reason:
        head += f" — {md_plain(st.reason)}"
    lines = [
        head,
        "",
        f"- **Progress:** {st.waves_done}/{st.waves_total} waves done over "
        f"{plural(len(st.clusters), 'cluster')} ({tally(c.state for c in st.clusters.values())})",
        f"- **Hosts:** {st.hosts_changed:,} changed, {st.hosts_rolled_back:,} rolled back, "
        f"{st.hosts_quarantined:,} quarantined, {st.hosts_deferred:,} deferred (in repair)",
        f"- **Jobs interrupted:** {st.jobs_interrupted}",
        *_cost_total(st),
    ]
    if st.waiting_for:
        lines.append(f"- **Waiting for:** {names(st.waiting_for)} to hand clusters over")
    if st.clusters:
        lines.append("")
        lines += item_list(
            ["cluster", "state", "waves", "changed", "failures", "note"],
            (
                (
                    c.cluster,
                    state_word(c.state),
                    f"{c.waves_done}/{c.waves_total}",
                    c.hosts_changed,
                    c.failures,
                    explain_wait(c.reason)
                    or (f"waiting for {names(c.waiting_for)}" if c.waiting_for else ""),
                )
                for c in sorted(st.clusters.values(), key=lambda c: c.cluster)
            ),
            what="clusters",
        )
    return bounded("\n".join(lines))
