"""The audit's ``dead_owner`` rule: hosts held by an owner that died without handing them back.

The record alone cannot tell a dead owner from a slow one: a train whose worker was SIGKILLed
and that waits for a restarted worker holds its hosts exactly as one that was terminated on the
server. So this rule needs the Temporal server's answer, and ``trainctl audit`` asks it when the
server answers (and says when it could not):

- ``dead_owner``: at the end of the log, a host out of service (not in repair, not quarantined)
  held by an owner that recorded no close (``owner_closed``) while the owner's workflow (its id
  is the owner's name: ``train-c00``, ``ops-<request_id>``, a campaign's) is not running:
  closed, terminated or unknown to the server. Nobody will ever hand that host back.

Hosts whose owner closed are ``host_lost`` (``orchestrator.audit.record_checks``); this rule only
judges the
holds ``host_lost`` lets pass as "an open maintenance still holds it".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from orchestrator.audit.record_checks import (
    IN_REPAIR,
    IN_SERVICE,
    QUARANTINED,
    AuditReport,
    Violation,
    _ClusterReplay,
    audit_events,
)
from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.backend import RecordEntry as Event
from orchestrator.contracts.constants import NOT_MAINTENANCE_OWNERS

DEAD_OWNER = "dead_owner"


@dataclass(frozen=True)
class OpenHold:
    """A host out of service at the end of the log, held by an owner that recorded no close."""

    cluster: str
    host: str
    owner: str
    state: str
    since_t: float
    t: float  # fleet hours at the end of the log


def open_holds(rep: _ClusterReplay, last_t: float) -> list[OpenHold]:
    """The hosts of a replayed cluster that an open owner still holds."""
    out = []
    for name, h in rep.hosts.items():
        if h.state in (IN_SERVICE, IN_REPAIR, QUARANTINED) or h.holder is None:
            continue
        if h.holder in NOT_MAINTENANCE_OWNERS or rep.closed.get(h.holder, -1) > h.hold_seq:
            continue  # no owner's, or its owner closed: host_lost judges those
        out.append(OpenHold(rep.name, name, h.holder, h.state, h.hold_t, last_t))
    return out


def audit_with_holds(
    events: Iterable[tuple[int, Event, str]],
    domains: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[AuditReport, list[OpenHold]]:
    """The audit of ``events`` (``audit_events``), and the open holds at the end of the log,
    read in one pass over the record (a second replay rides along)."""
    shadow: dict[str, _ClusterReplay] = {}
    last_t = 0.0

    def tap() -> Iterator[tuple[int, Event, str]]:
        nonlocal last_t
        for seq, ev, cluster in events:
            rep = shadow.get(cluster)
            if rep is None:
                rep = shadow[cluster] = _ClusterReplay(cluster, domains)
            rep.apply(seq, ev)
            last_t = max(last_t, ev.t)
            yield seq, ev, cluster

    report = audit_events(tap(), domains)
    return report, [h for rep in shadow.values() for h in open_holds(rep, last_t)]


def audit_fleet_with_holds(
    fleet: FleetBackend, cluster: str | None = None
) -> tuple[AuditReport, list[OpenHold]]:
    """``audit.audit`` of the fleet (or one cluster, KeyError naming an unknown one), with its
    open holds."""
    if cluster is not None and cluster not in fleet.cluster_names():
        raise KeyError(f"cluster: unknown cluster {cluster!r}")
    return audit_with_holds(fleet.records(cluster=cluster), fleet.failure_domains(cluster))


def dead_owners(holds: Iterable[OpenHold], running: Mapping[str, bool]) -> list[Violation]:
    """``dead_owner`` for every hold whose owner the server says is not running
    (``running[owner]`` is False); an owner missing from ``running`` was not checked."""
    return [
        Violation(
            kind=DEAD_OWNER,
            cluster=h.cluster,
            host=h.host,
            t=h.t,
            seq=0,
            detail=f"{h.state} since fleet hour {h.since_t:g}, held by {h.owner}, whose "
            "workflow is not running and which recorded no close: nobody will hand it back",
        )
        for h in holds
        if running.get(h.owner) is False
    ]


def with_dead_owners(
    report: AuditReport, holds: Iterable[OpenHold], running: Mapping[str, bool]
) -> AuditReport:
    """``report`` with the ``dead_owner`` findings of ``holds`` added (end-of-log findings,
    after the others)."""
    found = dead_owners(holds, running)
    if not found:
        return report
    violations = sorted(
        [*report.violations, *found], key=lambda v: (v.seq == 0, v.seq, v.cluster, v.host or "")
    )
    return AuditReport(ok=False, violations=violations, events_checked=report.events_checked)
