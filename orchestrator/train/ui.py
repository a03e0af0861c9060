"""What the Temporal UI shows for a train and its domains (current details, child summaries).

A train's page answers "where is it, when will it be done, what is it waiting for, how much of
the budget is out"; a domain's page answers, per host, "what phase, which job does it wait for
and until when, what failed and why". Markdown from :mod:`orchestrator.ui_text`, bounded for
``meta-24k`` domains of thousands of hosts. Pure functions: the workflows call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.execution.messages import CycleCounts
from orchestrator.train.spec import TrainSpec
from orchestrator.train.types import TrainState
from orchestrator.ui_text import (
    bounded,
    explain_wait,
    host_list,
    names,
    one_line,
    plural,
    table,
    tally,
    versions,
)

_PHASES = {
    "running": "Running",
    "paused": "Paused",
    "halted": "Halted",
    "stopping": "Stopping",
    "stopped": "Stopped",
}


def train_summary(spec: TrainSpec) -> str:
    """The train's one-line summary: which cluster, to which versions."""
    return one_line(f"Maintenance train of {spec.cluster}: {versions(spec.targets)}")


def domain_summary(cluster: str, hosts: Sequence[str], targets: Mapping[str, str]) -> str:
    """A domain child's summary in the train's history: how many hosts, which, to what."""
    return one_line(
        f"{plural(len(hosts), 'host')} of {cluster} ({names(sorted(hosts), 3)}): "
        f"drain, update to {versions(targets)}, verify"
    )


def eta_line(st: TrainState, counts: CycleCounts, speed: float | None) -> str:
    """Hosts left this cycle and, from this cycle's pace so far, about when they are done."""
    done = counts.visited + counts.quarantined + counts.in_repair
    left = max(0, counts.hosts_total - done)
    if left == 0:
        return "every host visited this cycle"
    elapsed = counts.fleet_hours - st.cycle_started_hours
    if counts.visited <= 0 or elapsed <= 0:
        return f"{plural(left, 'host')} left this cycle; no estimate before the first returns"
    hours = left / (counts.visited / elapsed)
    wall = f", about {hours * 3600 / speed / 60:.0f} min wall time" if speed else ""
    return (
        f"{plural(left, 'host')} left this cycle: about {hours:.1f} fleet hours at this "
        f"cycle's pace{wall}"
    )


def rollout_lines(spec: TrainSpec) -> list[str]:
    """One line per campaign riding the train: its stage, targets and hosts (arrival order,
    a later one winning on a component both change)."""
    return [
        f"- **Rollout of {r.campaign}** (stage {r.stage}): {versions(r.targets)} on "
        + ("every host" if r.hosts is None else f"{plural(len(r.hosts), 'host')}")
        for r in spec.riding()
    ]


def train_details(
    spec: TrainSpec,
    st: TrainState,
    in_flight: Mapping[str, Sequence[str]],
    limit: int,
    speed: float | None,
) -> str:
    """The train page's current details (markdown)."""
    c = st.counts
    head = f"**{_PHASES.get(st.phase, st.phase)}** · cycle {st.cycle + 1} of {spec.cluster}"
    if st.reason and st.phase != "running":
        head += f" — {st.reason}"
    pct = 100.0 * c.visited / c.hosts_total if c.hosts_total else 0.0
    lines = [
        head,
        "",
        f"- **Progress:** {c.visited:,}/{c.hosts_total:,} hosts visited ({pct:.0f}%), "
        f"{c.in_flight:,} in maintenance, {c.quarantined:,} quarantined, "
        f"{c.in_repair:,} in repair (fleet hour {c.fleet_hours:.1f})",
        f"- **ETA:** {eta_line(st, c, speed)}",
    ]
    if st.phase == "running":
        why = explain_wait(st.waiting) if st.waiting else "nothing: taking hosts as room frees up"
        lines.append(f"- **Waiting for:** {why}")
    lines += [
        f"- **Budget:** {c.out_of_service:,} of {limit:,} hosts out of service allowed "
        f"(maintenance, repair and failures together); domain size {spec.domain_size}",
        f"- **Targets:** {versions(spec.targets)}",
        *rollout_lines(spec),
        f"- **So far:** {plural(st.visits_total, 'host visit')}, "
        f"{plural(st.quarantined_total, 'host')} quarantined, "
        f"{plural(st.jobs_interrupted, 'job')} interrupted, "
        f"{st.lost_gpu_hours:,.1f} GPU-hours of work lost to evictions, "
        f"{plural(st.cycles_completed, 'cycle')} completed",
    ]
    if in_flight:
        lines += ["", f"**Domains in maintenance** ({len(in_flight)}):", ""]
        lines += table(
            ["domain", "hosts"],
            ((d, f"{len(h)}: {names(sorted(h), 4)}") for d, h in sorted(in_flight.items())),
            what="domains",
        )
    return bounded("\n".join(lines))


def domain_details(
    domain_id: str,
    cluster: str,
    phase: str,
    targets: Mapping[str, str],
    hosts: Mapping[str, tuple[str, str]],
) -> str:
    """A domain page's current details: one row per host (phase, and what it waits for)."""
    lines = [
        f"**{phase.capitalize()}** · {plural(len(hosts), 'host')} of {cluster} "
        f"to {versions(targets)}",
        "",
        f"{tally(p for p, _ in hosts.values())}",
        "",
    ]
    order = {"draining": 0, "evicting": 1, "updating": 2, "installing": 3, "verifying": 4}
    rows = sorted(hosts.items(), key=lambda kv: (order.get(kv[1][0], 9), kv[0]))
    lines += host_list((h, p, n) for h, (p, n) in rows)
    lines += ["", f"_domain {domain_id}_"]
    return bounded("\n".join(lines))
