"""What the Temporal UI shows for a train and its domains (current details, child summaries).

A train's page answers "where is it, when will it be done, what is it waiting for, how much of
the budget is out"; a domain's page answers, per host, "what phase, which job does it wait for
and until when, what failed and why". Markdown from :mod:`orchestrator.contracts.ui_text`, bounded
for
``meta-24k`` domains of thousands of hosts. Pure functions: the workflows call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainState
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
from orchestrator.execution.cycle import settled, visited_this_cycle

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
    """Hosts left this cycle and, from this cycle's pace so far, about when they are done: the
    hosts settled (``cycle.settled``, each once) over the hours so far, as the projection of
    ``train status`` reads them."""
    done = settled(counts)
    left = max(0, counts.hosts_total - done)
    if left == 0:
        return "every host visited this cycle"
    elapsed = counts.fleet_hours - st.cycle_started_hours
    if done <= 0 or elapsed <= 0:
        return f"{plural(left, 'host')} left this cycle; no estimate before the first returns"
    hours = left * elapsed / done
    wall = f", about {hours * 3600 / speed / 60:.0f} min wall time" if speed else ""
    return (
        f"{plural(left, 'host')} left this cycle: about {duration(hours)} of fleet time at this "
        f"cycle's pace{wall}"
    )


def rest_line(st: TrainState) -> str:
    """Why a resting train takes nothing, and what ends its rest."""
    until = (
        f"the first health visit falls due at fleet hour {st.rest_until_hours:.1f}"
        if st.rest_until_hours is not None
        else "no health visit is due (verify_every is off)"
    )
    return (
        "every serving host is on its targets, so none is drained and no job stopped; "
        f"{until}; new targets, a campaign's rollout or a host needing updates starts the "
        f"next cycle ({plural(st.checked_total, 'host')} checked in place since this train "
        "started)"
    )


def rollout_lines(spec: TrainSpec) -> list[str]:
    """One line per campaign riding the train: its stage, targets and hosts (arrival order,
    a later one winning on a component both change)."""
    return [
        f"- **Rollout of {r.campaign}** (stage {r.stage}): {versions(r.targets)} on "
        + ("every host" if r.hosts is None else f"{plural(len(r.hosts), 'host')}")
        for r in spec.riding()
    ]


def next_command(spec: TrainSpec, st: TrainState) -> str:
    """The command that moves a train on from where it stands ('' when it needs none)."""
    c = spec.cluster
    if st.phase == "halted":
        latest = st.recent_failures[-1][0] if st.recent_failures else ""
        look = (
            f"`trainctl fleet host {latest}`"
            if latest
            else f"`trainctl train status --cluster {c}`"
        )
        return f"look at the failing hosts ({look}), then `trainctl train resume --cluster {c}`"
    if st.phase == "paused":
        return f"`trainctl train resume --cluster {c}`"
    if st.phase == "running" and st.waiting and not st.resting:
        return f"see what each waiting host waits for: `trainctl fleet host --behind --cluster {c}`"
    return ""


def failure_lines(st: TrainState) -> list[str]:
    """The latest failing hosts, each once with how often it failed and its latest reason."""
    if not st.recent_failures:
        return []
    count: dict[str, int] = {}
    why: dict[str, str] = {}
    for host, reason in st.recent_failures:
        count[host] = count.get(host, 0) + 1
        why[host] = reason
    order = list(dict.fromkeys(h for h, _ in reversed(st.recent_failures)))
    items = [
        f"`{h}`"
        + (f" ({count[h]} times)" if count[h] > 1 else "")
        + f": {md_plain(one_line(why[h], 160))}"
        for h in order[:5]
    ]
    return [f"- **Latest failures:** {'; '.join(items)}"]


def train_details(
    spec: TrainSpec,
    st: TrainState,
    in_flight: Mapping[str, Sequence[str]],
    limit: int,
    speed: float | None,
) -> str:
    """The train page's current details (markdown): lists and ``key: value`` lines only (the
    UI draws tables without padding). Each figure has one source: this cycle's counts come from
    the fleet (``counts``), the totals since this train started from its own state, and they
    say which they are. A halted, paused or waiting train ends with the command that moves it
    on."""
    c = st.counts
    # The hosts its domains hold now, as ``train status`` counts them: the fleet's count of
    # the last plan goes stale while the train plans nothing (halted, paused).
    held = sum(len(hosts) for hosts in in_flight.values())
    visited = visited_this_cycle(c)
    pct = 100.0 * visited / c.hosts_total if c.hosts_total else 0.0
    out = c.visited_now_out
    gone = f"; {out:,} of them since quarantined or in repair" if out else ""
    total = c.hosts_total
    maintenance = spec.budget.maintenance_limit(total) if total else limit
    lines = [
        _headline(spec, st),
        "",
        f"- **This cycle:** {visited:,} of {c.hosts_total:,} hosts visited ({pct:.0f}%{gone}), "
        f"{c.quarantined:,} quarantined, {c.in_repair:,} in repair when the train last looked at "
        f"the fleet (fleet hour {c.fleet_hours:.1f}); now {held:,} in maintenance",
        f"- **ETA:** {eta_line(st, c, speed)}",
    ]
    if st.phase == "running" and st.resting:
        lines.append(f"- **Resting:** {rest_line(st)}")
    elif st.phase == "running":
        why = explain_wait(st.waiting) if st.waiting else "nothing: taking hosts as room frees up"
        lines.append(f"- **Waiting for:** {md_plain(why)}")
    lines += failure_lines(st)
    lines += [
        f"- **Budget:** {c.out_of_service:,} of {limit:,} hosts out of service (the floor, "
        f"max_unavailable: maintenance, repair and failures together); planned work of every "
        f"owner at most {maintenance:,} (maintenance); domain size {spec.domain_size}",
        f"- **Targets:** {versions(spec.targets)}",
        *rollout_lines(spec),
        _since_start_line(st),
        *cost_item(st.cost),
    ]
    if in_flight:
        lines += ["", f"**Domains in maintenance** ({len(in_flight)}):", ""]
        lines += item_list(
            ["domain", "hosts"],
            ((d, f"{len(h)}: {names(sorted(h), 4)}") for d, h in sorted(in_flight.items())),
            what="domains",
        )
    step = next_command(spec, st)
    if step:
        lines += ["", f"**Next:** {step}"]
    return bounded("\n".join(lines))


def _headline(spec: TrainSpec, st: TrainState) -> str:
    """The train page's first line: its phase and cycle, and why it stopped if it did."""
    head = f"**{_PHASES.get(st.phase, st.phase)}** · cycle {st.cycle + 1} of {spec.cluster}"
    if st.phase == "running" and st.resting:
        head = f"**Resting** · after cycle {st.cycle + 1} of {spec.cluster}"
    if st.reason and st.phase != "running":
        head += f" — {md_plain(st.reason)}"
    return head


def _since_start_line(st: TrainState) -> str:
    """The train's own totals since it started (visits, checks, quarantines, work lost)."""
    return (
        f"- **Since this train started:** {plural(st.visits_total, 'host visit')} (drained), "
        f"{plural(st.checked_total, 'host')} checked in place (nothing pending), "
        f"{plural(st.quarantined_total, 'host')} quarantined by it, "
        f"{plural(st.jobs_interrupted, 'job')} interrupted, "
        f"{st.lost_gpu_hours:,.1f} GPU-hours of work lost to evictions, "
        f"{plural(st.cycles_completed, 'cycle')} completed"
    )


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
