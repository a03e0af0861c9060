"""The pure half of a train's operator controls: which phase takes which, and what a change does.

The ``pause``/``resume``/``stop`` update validators refuse a control the train's phase does not
take (a ValueError the client shows as one line), and ``reconfigure`` merges a live change into
the running spec. Both work on plain data, so they live here, tested without a workflow; the
workflow keeps the update handlers (Temporal finds them on its class) and the patch that chooses
how rollouts merge.
"""

from __future__ import annotations

from orchestrator.contracts.models import check_targets
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainChange

#: The phases each control is taken in. Not a resume of a running train: it would reset the
#: failure count, unasked. A second stop is no error while stopping (``stopped`` is refused
#: apart, with a type the client answers with the final status).
ALLOWED_PHASES: dict[str, tuple[str, ...]] = {
    "pause": ("running", "halted"),
    "resume": ("paused", "halted"),
    "stop": ("running", "paused", "halted", "stopping"),
}


def require_phase(phase: str, action: str) -> None:
    """Refuse ``action`` (pause, resume, stop) on a train in ``phase``: ValueError, one line."""
    if phase not in ALLOWED_PHASES[action]:
        raise ValueError(f"cannot {action} a train that is {phase}")


def apply_settings(spec: TrainSpec, change: TrainChange) -> None:
    """Domain size, budget, targets (merged) and failure threshold of a live change."""
    if change.domain_size is not None:
        spec.domain_size = change.domain_size
    if change.budget is not None:
        spec.budget = change.budget
    if change.targets is not None:
        spec.targets = {**spec.targets, **check_targets(change.targets, allow_upper=False)}
    if change.halt_after_failures is not None:
        spec.halt_after_failures = change.halt_after_failures


def change_rollouts(spec: TrainSpec, change: TrainChange) -> None:
    """Several campaigns ride at once, one rollout each: a ride adds or replaces that
    campaign's (keeping its place in the arrival order), a clear drops only the named
    campaign's (all when none is named). The older single ``rollout`` moves into the list."""
    by_campaign = {r.campaign: r for r in spec.riding()}
    if change.clear_rollout:
        if change.rollout_campaign:
            by_campaign.pop(change.rollout_campaign, None)
        else:
            by_campaign.clear()
    if change.rollout is not None:
        ride = change.rollout
        before = by_campaign.get(ride.campaign)
        if before is not None and before.failed and before.targets == ride.targets:
            # The campaign's next stage rolls the same change: what broke a host once
            # would break it again.
            ride = ride.model_copy(update={"failed": sorted({*before.failed, *ride.failed})})
        by_campaign[ride.campaign] = ride
    spec.rollout, spec.rollouts = None, list(by_campaign.values())


def note_rollout_failures(spec: TrainSpec, hosts: list[str], targets: dict[str, str]) -> None:
    """Hosts that failed in a domain installing ``targets`` (a rollout's over the train's own):
    every rollout riding the train whose targets the domain installed, and which covers the
    host, remembers it, so the train never gives it that change again (``RolloutScope``)."""
    if not hosts:
        return
    for r in spec.riding():
        if any(targets.get(c) != v for c, v in r.targets.items()):
            continue
        mine = [h for h in hosts if (r.hosts is None or h in r.hosts) and h not in r.failed]
        r.failed.extend(sorted(mine))


def change_single_rollout(spec: TrainSpec, change: TrainChange) -> None:
    """Before ``train-many-rollouts``: one rollout at a time, a ride replacing any other."""
    if change.clear_rollout:
        spec.rollout = None
    if change.rollout is not None:
        spec.rollout = change.rollout
