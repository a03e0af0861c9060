"""A campaign stage's gates, judged from its clusters' counts: pure functions over the status.

The failure gate: an explicit ``max_failures`` (a count, or a percentage of the stage's planned
hosts, rounded up: ``5%`` of a 4-host canary allows 1) keeps its meaning; without one, the stage
fails only when failures among the hosts it tried exceed the fleet's base rate significantly
(``planning.failure_gate``: one-sided exact binomial test), so a host failing alone is a bad
host, quarantined by the train, and the rollout goes on.

A failure is a host of the stage, in service when the stage began (hosts down already are left
out: their defect is not the change's), that is now quarantined, or in repair after it got the
change (so hosts that go bad during the bake still count).

The Prometheus gate only holds a stage: ``note_prometheus`` writes its answer into the stage's
gate line (the workflow asks the query and naps).
"""

from __future__ import annotations

from orchestrator.contracts.campaign_spec import PrometheusGate
from orchestrator.contracts.campaign_types import (
    CampaignStatus,
    ClusterStage,
    PromAnswer,
    PromQuery,
    StagePlanModel,
    StageStatus,
)
from orchestrator.planning import failure_gate
from orchestrator.planning.campaign_plan import failure_limit

#: The base rate a stage planned before plans carried one is judged against (about 2%, the
#: simulated fleet's random failures); plans now carry the backend's rate for the change.
BASE_RATE = 0.02


def roll_up(plan: StagePlanModel, ss: StageStatus) -> None:
    """Stage totals from its clusters: changed, failures, bake remaining, baking or not."""
    cs = list(ss.clusters.values())
    ss.hosts_changed = sum(c.changed for c in cs)
    ss.failures = sum(len(c.failed) for c in cs)
    remaining = 0.0
    for c in cs:
        if c.state == "done":
            continue
        if c.state == "baking" and c.done_hours is not None:
            left = c.done_hours + plan.bake_hours - c.fleet_hours
        else:
            left = plan.bake_hours
        remaining = max(remaining, left)
    ss.bake_remaining_hours = round(max(0.0, remaining), 3)
    if ss.state in ("running", "baking") and cs:
        baking = all(c.state in ("baking", "done") for c in cs)
        ss.state = "baking" if baking and any(c.state == "baking" for c in cs) else "running"


def marked_bad(ss: StageStatus) -> dict[str, str]:
    """The stage's targets marked bad fleet-wide, as its clusters' looks saw them."""
    return {c: v for cs in ss.clusters.values() for c, v in sorted(cs.marked_bad.items())}


def judge_stage(plan: StagePlanModel, ss: StageStatus) -> str | None:
    """Why the stage fails its failure gate now, or None; notes the limit and verdict.

    A target of the stage marked bad fleet-wide (by blame, or by an operator with
    ``trainctl versions mark``) fails it at once: no train or operation installs it any more,
    so the stage could never pass, and what got it is rolled back."""
    bad = marked_bad(ss)
    if bad:
        pairs = ", ".join(f"{c}={v}" for c, v in bad.items())
        ss.gate = f"{pairs} marked bad fleet-wide (trainctl versions list)"
        return f"{pairs} marked bad fleet-wide"
    failures = ss.failures
    limit = failure_limit(plan.gates, ss.hosts_planned)
    if limit is not None:
        ss.failure_limit = limit
        ss.gate = f"{failures} failed of at most {limit} (max_failures {plan.gates.max_failures})"
        if failures > limit:
            return (
                f"{failures} hosts failed, over the gate's {limit} "
                f"(max_failures {plan.gates.max_failures} of {ss.hosts_planned} hosts)"
            )
        return None
    tried = sum(c.attempted for c in ss.clusters.values())
    verdict = failure_gate.judge(failures, tried, plan.base_rate)
    ss.failure_limit = verdict.threshold
    ss.gate = verdict.reason
    return verdict.reason if verdict.bad else None


def operation_max_failures(plan: StagePlanModel, cs: ClusterStage) -> int | None:
    """An explicit limit for a cluster's bulk operation, or None (the operation's own rule)."""
    return failure_limit(plan.gates, cs.in_scope or plan.hosts_per_cluster.get(cs.cluster, 0))


def roll_up_campaign(status: CampaignStatus) -> None:
    """Top-level counts over stages: distinct hosts (stages overlap: a canary, its cluster)."""
    changed: dict[str, int] = {}
    down: set[str] = set()
    for s in status.stages:
        for c in s.clusters.values():
            changed[c.cluster] = max(changed.get(c.cluster, 0), c.changed)
            down.update(c.failed)
    status.hosts_changed = sum(changed.values())
    status.hosts_quarantined = len(down)


def note_prometheus(ss: StageStatus, answer: PromAnswer) -> bool:
    """The Prometheus gate's answer into the stage's gate line: True when clear (the query
    answers nothing); else the stage is held, saying what fires."""
    base = ss.gate.split(" | prometheus")[0]
    if answer.firing == 0:
        ss.gate = base
        return True
    why = answer.error or f"{answer.firing} series firing, e.g. {', '.join(answer.sample)}"
    ss.state = "held"
    ss.gate = f"{base} | prometheus: {why}"
    return False


def prom_query(prom: PrometheusGate) -> PromQuery:
    """The one look the activity makes: the query, and who asks (never a password)."""
    return PromQuery(
        url=prom.url, query=prom.query, username=prom.username, password_file=prom.password_file
    )


def failed_look(message: str) -> PromAnswer:
    """A look that failed as an activity (its timeout, a worker lost on every attempt): an
    unreadable answer, which holds the stage with the first line of ``message`` as its reason."""
    why = (message.strip().splitlines() or ["no reason given"])[0][:200]
    return PromAnswer(firing=-1, error=f"prometheus: the look failed: {why}")
