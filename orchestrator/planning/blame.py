"""Which change broke the hosts? Rank component=version pairs by how well they explain failures.

When a stage fails, the question an on-call engineer asks first is "which change?" — with
several rollouts in flight (kernel, NIC firmware, BIOS) on a deep stack, the failing hosts may
carry more than one new version. This module answers it from what any fleet can observe: each
changed host's versions after its change and whether it passed verification. Never from
fault-injection state (which a real fleet does not have).

The score of a pair (component, version) is how well "carries the pair" predicts "failed":

    precision = failing carriers / all carriers      (a pair every host carries says nothing)
    recall    = failing carriers / all failing hosts (a cause must explain the failures)
    score     = 2 * precision * recall / (precision + recall)    (F1, in [0, 1])

A pair only competes if it is new: some host verified in the same window lacks it, or it is
the target of a rollout in flight; versions every observed host shares are background. Each
pair is attributed to the rollout (campaign) in flight that installs it, so with two campaigns
the bad build is blamed on the right one. Ties break towards the pair carried by fewer passing
hosts, then the one a rollout in flight installs, then by name, so the ranking is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.contracts.campaign_types import Blame


@dataclass(frozen=True)
class HostOutcome:
    """One verified host: its versions after the change, and whether it passed."""

    name: str
    versions: Mapping[str, str]
    passed: bool


def rank_blame(
    outcomes: Iterable[HostOutcome],
    in_flight: Mapping[str, Mapping[str, str]] | None = None,
    limit: int = 5,
) -> list[Blame]:
    """Suspects, best first; empty when no host failed.

    ``in_flight`` maps each rollout in flight (a campaign name) to its targets
    (component -> version); a pair is attributed to the rollout that installs it.
    """
    hosts = list(outcomes)
    failing = [h for h in hosts if not h.passed]
    if not failing:
        return []
    flights = in_flight or {}
    owner = {(c, v): name for name, targets in sorted(flights.items()) for c, v in targets.items()}
    carriers: dict[tuple[str, str], list[HostOutcome]] = {}
    for h in hosts:
        for pair in h.versions.items():
            carriers.setdefault(pair, []).append(h)
    out = []
    for pair, holders in carriers.items():
        new = pair in owner or len(holders) < len(hosts)
        if not new:
            continue  # every observed host has it: background, not a change
        bad = sum(1 for h in holders if not h.passed)
        if bad == 0:
            continue
        precision, recall = bad / len(holders), bad / len(failing)
        score = 2 * precision * recall / (precision + recall)
        out.append(
            Blame(
                component=pair[0],
                version=pair[1],
                campaign=owner.get(pair),
                failing=bad,
                passing=len(holders) - bad,
                score=round(score, 4),
            )
        )
    # Equal evidence: the pair a rollout in flight installs first. A train visiting a canary
    # host installs its own pending targets with the campaign's in one reboot, so the hosts
    # cannot tell them apart; the campaign's is the change on trial (the train's own have
    # been passing on the hosts it visited before).
    out.sort(key=lambda b: (-b.score, b.passing, b.campaign is None, b.component, b.version))
    return out[:limit]


def verifications(
    current: Mapping[str, Mapping[str, str]],
    record: Iterable[tuple[str, str, Mapping[str, Any]]],
) -> list[HostOutcome]:
    """Every verification of ``current``'s hosts in the record (host, kind, detail in order),
    each with the versions the host had then: the host's installs are undone, walking back
    from its versions now. A host whose change failed and that an operation then rolled back
    serves on its old versions again, so its failure is only in the record."""
    per_host: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for host, kind, detail in record:
        if host in current and kind in ("updated", "verified"):
            per_host.setdefault(host, []).append((kind, detail))
    out = []
    for host, entries in per_host.items():
        versions = dict(current[host])
        for kind, detail in reversed(entries):
            if kind == "verified":
                out.append(HostOutcome(host, dict(versions), bool(detail.get("passed"))))
                continue
            for comp, version in (detail.get("before") or {}).items():
                if version is None:
                    versions.pop(comp, None)
                else:
                    versions[comp] = str(version)
    return out
