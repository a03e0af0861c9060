"""What the Temporal UI shows for a campaign: a one-line summary and the current details.

The details answer the on-call questions in plain words: which stage is it in, how many hosts
changed, how many failed against the gate, how long the bake has left, and what holds it.
Markdown; pure functions the workflow and the client call.
"""

from __future__ import annotations

from orchestrator.campaign.spec import CampaignSpec
from orchestrator.campaign.types import CampaignState

_STATE = {
    "running": "Running",
    "held": "Held",
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
    return f"Campaign {spec.name}: {_versions(spec.targets)} over {spec.scope.cluster} ({names})"


def campaign_details(spec: CampaignSpec, st: CampaignState) -> str:
    """Current details: the state line, then one row per stage."""
    status = st.status
    lines = [
        f"**{_STATE.get(status.state, status.state)}**: {_versions(spec.targets)}"
        + (f" — {status.reason}" if status.reason else ""),
        "",
        f"{status.hosts_changed} hosts changed, {status.hosts_quarantined} quarantined, "
        f"{status.hosts_rolled_back} rolled back",
        "",
        "| stage | state | clusters | hosts changed | failures / gate | bake left |",
        "|---|---|---|---:|---|---:|",
    ]
    for plan, s in zip(st.plan, status.stages, strict=False):
        clusters = (
            ", ".join(f"{c} {s.clusters[c].state}" if c in s.clusters else c for c in plan.clusters)
            or "none left"
        )
        limit = "-" if s.failure_limit is None else str(s.failure_limit)
        bake = "-" if s.bake_remaining_hours is None else f"{s.bake_remaining_hours:.1f} h"
        lines.append(
            f"| {s.name} | {s.state} | {clusters} | {s.hosts_changed}/{s.hosts_planned} "
            f"| {s.failures} of at most {limit} | {bake} |"
        )
    current = next((s for s in status.stages if s.name == status.stage), None)
    if current is not None and current.gate:
        lines += ["", f"Gate of {current.name}: {current.gate}"]
    if current is not None and current.reason:
        lines += ["", f"Stage {current.name}: {current.reason}"]
    if status.blame:  # which change: what on-call asks first when a stage fails
        lines += ["", "| suspect | rollout | failing | passing | score |"]
        lines += ["|---|---|---:|---:|---:|"]
        lines += [
            f"| {b.component} {b.version} | {b.campaign or '-'} | {b.failing} | {b.passing} "
            f"| {b.score:.2f} |"
            for b in status.blame[:3]
        ]
    return "\n".join(lines)
