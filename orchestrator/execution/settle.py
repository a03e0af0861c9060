"""Verifying hosts and settling them: back to service, or quarantined with a reason.

One definition each of: verify (without returning, so a bulk operation can judge a whole wave
first), settle (return the passed, quarantine the failed), verify-and-settle (a train's batch),
quarantine, and hand back (release untouched hosts, verify touched ones) so that no host is ever
left cordoned and forgotten. Every step is idempotent: a host an earlier attempt returned counts
as passed, a host that left our hands (repair took it) counts as failed and is not touched, and
one handed over to someone outside trainctl (an operator drained it in Slurm) is theirs: not
touched, and neither returned nor quarantined (its visit is not done, and no failure of ours).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from orchestrator.contracts.backend import ClusterBackend
from orchestrator.contracts.constants import HELD_STATES, NO_OWNER, UNTOUCHED_STATES
from orchestrator.contracts.messages import VerifyOutcome, VerifyResult
from orchestrator.contracts.models import HostState


def _already_returned(b: ClusterBackend, name: str, owner: str) -> bool:
    h = b.host(name)
    return h.state == HostState.IN_SERVICE and h.owner != owner


def _ours(b: ClusterBackend, name: str, owner: str) -> bool:
    h = b.host(name)
    return h.owner == owner and h.state in HELD_STATES


def verify_hosts(
    b: ClusterBackend,
    owner: str,
    hosts: Iterable[str],
    targets: Mapping[str, str],
    per_host: Mapping[str, Mapping[str, str]] | None = None,
) -> VerifyOutcome:
    """Verify each host against ``targets`` (or its own ``per_host`` versions); none returns."""
    out = VerifyOutcome()
    for name in hosts:
        h = b.host(name)
        if _already_returned(b, name, owner):
            out.passed.append(name)
        elif not _ours(b, name, owner):
            out.failed[name] = f"left maintenance: {h.state} {h.reason}".strip()
        else:
            v = b.verify(name, (per_host or {}).get(name, targets), owner)
            if v.passed:
                out.passed.append(name)
            else:
                out.failed[name] = v.reason
    return out


def _handed_over(b: ClusterBackend, name: str) -> bool:
    """Out of service, held by nobody: taken by someone outside trainctl (an operator drained
    it in Slurm), whose visit is not done and whose failure it is not."""
    h = b.host(name)
    return h.owner == NO_OWNER and h.state != HostState.IN_SERVICE


def quarantine_hosts(
    b: ClusterBackend, owner: str, hosts: Mapping[str, str], prefix: str = ""
) -> VerifyResult:
    """Quarantine each host we hold, with ``prefix: why``; hosts repair took stay with repair,
    and hosts handed over to someone outside trainctl are theirs (not counted quarantined)."""
    out = VerifyResult()
    for name, why in hosts.items():
        if b.host(name).owner == owner:
            b.quarantine(name, owner, f"{prefix}: {why}" if prefix else why)
        elif _handed_over(b, name):
            continue
        out.quarantined[name] = why
    return out


def return_hosts(b: ClusterBackend, owner: str, hosts: Iterable[str], visit: bool) -> VerifyOutcome:
    """Return verified hosts to service (``visit``: a train's visit); say which could not go."""
    out = VerifyOutcome()
    for name in hosts:
        if _already_returned(b, name, owner) or (
            _ours(b, name, owner) and b.return_to_service(name, owner, visit=visit)
        ):
            out.passed.append(name)
        else:
            h = b.host(name)
            out.failed[name] = f"not verified: {h.state} {h.reason}".strip()
    return out


def settle_hosts(
    b: ClusterBackend,
    owner: str,
    passed: Iterable[str],
    failed: Mapping[str, str],
    visit: bool,
    prefix: str = "verification failed",
) -> VerifyResult:
    """Return the verified hosts and quarantine the failed ones (and any that could not go)."""
    back = return_hosts(b, owner, passed, visit)
    out = VerifyResult(returned=back.passed)
    bad = {**failed, **back.failed}
    out.quarantined.update(quarantine_hosts(b, owner, bad, prefix).quarantined)
    return out


def verify_and_settle(
    b: ClusterBackend,
    owner: str,
    hosts: Iterable[str],
    targets: Mapping[str, str],
    visit: bool,
    per_host: Mapping[str, Mapping[str, str]] | None = None,
    prefix: str = "verification failed",
) -> VerifyResult:
    """Verify, then return the healthy hosts and quarantine the rest."""
    v = verify_hosts(b, owner, hosts, targets, per_host)
    return settle_hosts(b, owner, v.passed, v.failed, visit, prefix)


def hand_back(
    b: ClusterBackend,
    owner: str,
    hosts: Iterable[str] | None,
    targets: Mapping[str, str],
    visit: bool,
) -> VerifyResult:
    """Give back what ``owner`` holds of ``hosts`` (all it holds when None): untouched hosts go
    straight back to service, touched ones are verified first (and quarantined if they fail)."""
    names = list(hosts) if hosts else [n for n in b.host_names() if b.host(n).owner == owner]
    out = VerifyResult()
    touched = []
    for name in names:
        h = b.host(name)
        if h.owner != owner:
            continue
        if h.state in UNTOUCHED_STATES:
            b.release(name, owner)
            out.returned.append(name)
        elif h.state in HELD_STATES:
            touched.append(name)
    if touched:
        settled = verify_and_settle(b, owner, touched, targets, visit)
        out.returned += settled.returned
        out.visited += settled.returned
        out.quarantined.update(settled.quarantined)
    return out
