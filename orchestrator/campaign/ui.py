"""What the Temporal UI shows for a campaign: a one-line summary and the current details.

The details answer the on-call questions in plain words: which stage is it in, how many hosts
changed, how many failed against the gate, how long the bake has left, and what holds it.
Markdown; pure functions the workflow and the client call.
"""

from __future__ import annotations

from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import CampaignState, CampaignStatus
from orchestrator.contracts.ui_text import duration, md_plain, no_html, plural

_STATE = {
    "running": "Running",
    "held": "Held",
    "waiting_for_approval": "Waiting for approval",
    "paused": "Paused",
    "rolling_back": "Rolling back",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "rolled_back": "Rolled back",
    "aborted": "Aborted",
}


def _versions(targets: dict[str, str]) -> str:
    return ", ".join(f"{c} {v}" for c, v in sorted(targets.items()))


def campaign_summary(spec: CampaignSpec) -> str:
    """The one-line summary: what goes where, in how many stages."""
    names = " → ".join(s.name for s in spec.stages)
    return md_plain(
        f"Campaign {spec.name}: {_versions(spec.targets)} over {spec.scope.cluster} ({names})"
    )


def next_command(
    name: str, state: str, held_on_blame: bool, bad: dict[str, str] | None = None
) -> str:
    """The command that moves a campaign on from where it stands ('' when it needs none);
    ``bad``: the versions of ours blame named (marked bad fleet-wide)."""
    if state == "rolled_back":
        pairs = " ".join(f"{c}={v}" for c, v in sorted((bad or {}).items())) or "COMPONENT=VERSION"
        return (
            f"`trainctl versions list` shows what is marked bad; once a fixed build is out, "
            f"`trainctl versions clear {pairs} --reason ...` and start the campaign again "
            "with it"
        )
    if held_on_blame:
        return (
            f"clear the blamed version (`trainctl versions clear ...`) and `trainctl campaign "
            f"resume --id {name}`, or `trainctl campaign abort --id {name}`"
        )
    if state == "held":
        return (
            f"fix what the gate's query finds, or `trainctl campaign abort --id {name}`; it "
            "goes on by itself once the query answers nothing"
        )
    if state == "paused":
        return f"`trainctl campaign resume --id {name}`"
    if state == "waiting_for_approval":
        return "a listed approver runs the command above (or `trainctl campaign abort`)"
    return ""


def _text(spec: CampaignSpec, text: str) -> str:
    """A reason or gate line as markdown: no HTML (``no_html``), and the Prometheus query in
    code, so the UI neither curls its quotes nor reads it as markup: what on-call copies
    from the page runs."""
    prom = spec.gates.prometheus
    if prom is None or prom.query not in text:
        return no_html(text)
    return f"`{prom.query}`".join(no_html(part) for part in text.split(prom.query))


def rolled_back_hosts(status: CampaignStatus) -> str:
    """``5 hosts (c00 3, c01 2)``: the hosts a rollback put back, counted per cluster (a
    status without the per-cluster counts names the clusters its stages touched)."""
    per = status.rolled_back_per_cluster
    if per:
        where = ", ".join(f"{c} {n:,}" for c, n in sorted(per.items()))
        return f"{plural(status.hosts_rolled_back, 'host')} ({where})"
    touched = sorted(
        {c for s in status.stages for c, cs in s.clusters.items() if cs.state != "pending"}
    )
    return f"{plural(status.hosts_rolled_back, 'host')} of {', '.join(touched) or '-'}"


def _rolled_back(st: CampaignState) -> list[str]:
    """What a rollback took back: the hosts, per cluster, and the versions marked bad."""
    bad = ", ".join(f"{c} {v}" for c, v in sorted(st.blamed.items())) or "the blamed version"
    return [
        "",
        f"- **Rolled back:** {rolled_back_hosts(st.status)} to their previous versions; "
        f"{bad} marked bad fleet-wide",
    ]


def _cost(status: CampaignStatus) -> list[str]:
    """What the campaign and its operations have cost the jobs, per cluster as its latest
    look there read the record, added up over the clusters."""
    latest = {c: cs.cost for s in status.stages for c, cs in s.clusters.items() if cs.cost}
    if not latest:
        return []
    total = sum(c.total_gpu_hours for c in latest.values())
    stopped = sum(c.jobs_stopped for c in latest.values())
    return [f"- **Cost to jobs:** {total:,.1f} GPU-h; {stopped:,} job(s) stopped"]


def campaign_details(spec: CampaignSpec, st: CampaignState) -> str:
    """Current details: the state line, then one bullet per stage (``key: value`` parts: the
    UI draws tables without padding, so columns ran together)."""
    status = st.status
    lines = [
        f"**{_STATE.get(status.state, status.state)}**: {_versions(spec.targets)}"
        + (f" — {_text(spec, status.reason)}" if status.reason else ""),
        "",
        # What the summary says, which a run continued as new has none of (the server starts
        # it without the first run's summary: the UI says "No summary available").
        f"- **Campaign:** {md_plain(spec.name)} over {md_plain(spec.scope.cluster)} · stages: "
        + md_plain(" → ".join(s.name for s in spec.stages)),
        f"- **Hosts:** {status.hosts_changed} changed, {status.hosts_quarantined} quarantined, "
        f"{status.hosts_rolled_back} rolled back",
        *_cost(status),
        "",
        "**Stages:**",
        "",
    ]
    for plan, s in zip(st.plan, status.stages, strict=False):
        clusters = (
            ", ".join(f"{c} {s.clusters[c].state}" if c in s.clusters else c for c in plan.clusters)
            or "none left"
        )
        gate = (
            f"{s.failures} (no limit yet)"
            if s.failure_limit is None
            else f"{s.failures} (the gate allows at most {s.failure_limit})"
        )
        part = f"- **{s.name}** {s.state} · clusters: {clusters} · hosts changed: "
        part += f"{s.hosts_changed} of {s.hosts_planned} · failures: {gate}"
        if s.bake_remaining_hours is not None and s.state in ("running", "baking", "held"):
            part += f" · bake left: {duration(s.bake_remaining_hours)}"
        lines.append(part)
    current = next((s for s in status.stages if s.name == status.stage), None)
    if current is not None and current.gate:
        lines += ["", f"- **Gate of {current.name}:** {_text(spec, current.gate)}"]
    if current is not None and current.reason:
        lines += [f"- **Stage {current.name}:** {_text(spec, current.reason)}"]
    if status.blame:  # which change: what on-call asks first when a stage fails
        lines += ["", "**Suspects** (best first):", ""]
        lines += [
            f"- **{b.component} {b.version}** · rollout: {b.campaign or '-'} · failing: "
            f"{b.failing} · passing: {b.passing} · score: {b.score:.2f}"
            for b in status.blame[:3]
        ]
    if status.state == "rolled_back":
        lines += _rolled_back(st)
    step = next_command(spec.name, status.state, status.held_on_blame, st.blamed)
    if step:
        lines += ["", f"**Next:** {step}"]
    return "\n".join(lines)
