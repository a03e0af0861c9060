"""Invariants checked over the fleet's append-only event log, the way an auditor would.

The audit trusts nothing but the log: it replays every cluster from the fleet's initial state
(all hosts in service on ``INITIAL_VERSIONS``) in ``seq`` order, rebuilding host states, holders,
upper-layer versions and job membership as plain dicts, and checks each event against what it
has rebuilt. Fields an event carries about itself (a ``job_start``'s versions, a return's
``verified=True``) are not believed; the replayed state is. It streams, so a few hundred
thousand events take seconds.

The violation kinds, and the report, are ``orchestrator.contracts.audit_types``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from orchestrator.contracts.audit_types import KINDS as KINDS
from orchestrator.contracts.audit_types import AuditReport, Violation
from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.backend import RecordEntry as Event
from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS, UNTOUCHED_STATES
from orchestrator.contracts.models import HostState
from orchestrator.contracts.updates import host_targets
from orchestrator.fleet.presets import INITIAL_VERSIONS

IN_SERVICE = HostState.IN_SERVICE
IN_REPAIR = HostState.IN_REPAIR
QUARANTINED = HostState.QUARANTINED
#: States a host is in while someone works on it, so returning from them needs verification.
_TOUCHED_STATES = HELD_STATES - UNTOUCHED_STATES
_UPPER = ("gpu_driver", "cuda")
INITIAL_UPPER = (INITIAL_VERSIONS["gpu_driver"], INITIAL_VERSIONS["cuda"])


@dataclass
class _Host:
    """Replayed state of one host that has appeared in the log."""

    state: str = IN_SERVICE
    holder: str | None = None
    hold_seq: int = 0
    hold_t: float = 0.0
    updated_since_out: bool = False
    verified_ok: bool = False
    rolled_back: bool = False  # put back on its previous versions during this hold
    bound: dict[str, str] | None = None  # what the holder had recorded when it took the host
    #: what the holder's latest install meant the host to carry (its ``targets``): a campaign's
    #: rollout riding a train gives its own version of a component over the train's
    declared: dict[str, str] | None = None


def _domains(host: str) -> tuple[str, str]:
    """(rack, zone) from a topology host name ``cNN-zNN-rNNN-hNN``."""
    rack = host.rsplit("-", 1)[0]
    return rack, rack.rsplit("-", 1)[0]


class _ClusterReplay:
    def __init__(self, name: str, domains: Mapping[str, tuple[str, str]] | None) -> None:
        self.name = name
        self.domains = domains
        self.hosts: dict[str, _Host] = {}
        self.down = 0
        self.planned: set[str] = set()  # held for planned work (a train's, an operation's, ...)
        self.down_rack: dict[str, int] = {}
        self.down_zone: dict[str, int] = {}
        # Running jobs' host sets, and upper-layer versions of hosts that left INITIAL_UPPER:
        # a job of 2,048 hosts then costs a set build, not 2,048 Python steps, at start and end.
        self.jobs: dict[int, frozenset[str]] = {}
        self.upper: dict[str, tuple[str, str]] = {}
        self.closed: dict[str, int] = {}  # owner -> seq of its latest owner_closed
        self.targets: dict[str, str] = {}  # recorded for the cluster
        self.target_setter: dict[str, str] = {}  # component -> owner that recorded it
        self.versions: dict[str, dict[str, str]] = {}  # hosts whose versions left the initial
        self.scopes: dict[str, tuple[dict[str, str], list[str]]] = {}  # operation -> scope
        self.violations: list[Violation] = []
        self.checks = 0  # hosts checked in place (``checked`` entries)

    def host(self, name: str) -> _Host:
        h = self.hosts.get(name)
        if h is None:
            h = self.hosts[name] = _Host()
        return h

    def where(self, name: str) -> tuple[str, str]:
        if self.domains is not None and name in self.domains:
            return self.domains[name]
        return _domains(name)

    def flag(self, kind: str, host: str | None, ev: Event, seq: int, detail: str) -> None:
        self.violations.append(
            Violation(kind=kind, cluster=self.name, host=host, t=ev.t, seq=seq, detail=detail)
        )

    # ------------------------------------------------------------------ events
    def apply(self, seq: int, ev: Event) -> None:
        kind = ev.kind
        if kind == "host_state":
            self._host_state(seq, ev)
        elif kind == "job_start":
            self._job_start(seq, ev)
        elif kind in ("job_end", "job_interrupted"):
            self.jobs.pop(int(ev.detail["job"]), None)
        elif kind == "updated" and ev.host is not None:
            self._updated(seq, ev)
        elif kind == "verified" and ev.host is not None:
            self.host(ev.host).verified_ok = bool(ev.detail.get("passed"))
        elif kind == "checked" and ev.host is not None:
            self._checked(seq, ev, ev.host)
        elif kind == "targets":
            new = {str(c): str(v) for c, v in (ev.detail.get("targets") or {}).items()}
            for c, v in new.items():
                if self.targets.get(c) != v:
                    self.target_setter[c] = ev.actor
            self.targets = new
        elif kind == "operation_scope":
            owner = str(ev.detail.get("owner") or ev.actor)
            targets = {str(c): str(v) for c, v in (ev.detail.get("targets") or {}).items()}
            self.scopes[owner] = (targets, [str(h) for h in ev.detail.get("hosts") or []])
        elif kind == "owner_closed":
            owner = str(ev.detail.get("owner") or "")
            self.closed[owner] = seq
            # Its recorded targets stay the cluster's (repair reimages with them), but bind no
            # later visit: a new train of the same name (a campaign's, after this one stopped)
            # is bound by what it records itself.
            for c, who in list(self.target_setter.items()):
                if who == owner:
                    self.target_setter[c] = ""
            if ev.detail.get("outcome") == "succeeded" and owner in self.scopes:
                self._check_scope(seq, ev, owner)

    def _host_state(self, seq: int, ev: Event) -> None:
        if ev.host is None:
            return
        name, d = ev.host, ev.detail
        h = self.host(name)
        before, after = h.state, str(d["after"])
        was_down, is_down = before != IN_SERVICE, after != IN_SERVICE
        if was_down != is_down:
            self._count_down(name, 1 if is_down else -1)
        if not was_down and is_down:
            h.updated_since_out = h.verified_ok = h.rolled_back = False
            h.declared = None
        if after == HostState.IN_MAINTENANCE and d.get("reason") == "rolling back":
            h.rolled_back = True
        h.state = after
        if not is_down:
            self._back_in_service(seq, ev, name, h, before, was_down)
            return
        self._held_by(seq, ev, name, h, after, was_down)
        if d.get("limit") is not None:
            self._check_budget(seq, ev, name, d)

    def _count_down(self, name: str, step: int) -> None:
        """One host more (``step`` 1) or fewer (-1) out of service, fleet-wide and in its
        rack and zone."""
        rack, zone = self.where(name)
        self.down += step
        self.down_rack[rack] = self.down_rack.get(rack, 0) + step
        self.down_zone[zone] = self.down_zone.get(zone, 0) + step

    def _back_in_service(
        self, seq: int, ev: Event, name: str, h: _Host, before: str, was_down: bool
    ) -> None:
        """A host in service again: checked as a return, then nobody holds it."""
        if was_down:
            self._check_return(seq, ev, name, h, before)
            if before != IN_REPAIR:
                needs_check = before in _TOUCHED_STATES or h.updated_since_out
                if needs_check and not h.verified_ok:
                    why = "updated" if h.updated_since_out else before
                    self.flag(
                        "unverified_return",
                        name,
                        ev,
                        seq,
                        f"returned to service from {before} ({why}) without passing "
                        "verification after its last update",
                    )
        h.holder, h.updated_since_out, h.verified_ok, h.bound = None, False, False, None
        self.planned.discard(name)

    def _held_by(
        self, seq: int, ev: Event, name: str, h: _Host, after: str, was_down: bool
    ) -> None:
        """Who holds a host out of service after this change, and whether that is planned work."""
        d = ev.detail
        # Cordoned by an owner, or reclaimed from quarantine by one to roll a bad build back.
        if d.get("owner") and (after == HostState.CORDONED or d.get("reclaimed")):
            taker = str(d["owner"])
            if was_down and h.holder not in (
                None,
                taker,
                IN_REPAIR,
                QUARANTINED,
                *NOT_MAINTENANCE_OWNERS,
            ):
                # two workers' transactions both took it (a lost update): never one host
                # held by two owners at once
                self.flag(
                    "two_owners",
                    name,
                    ev,
                    seq,
                    f"taken by {taker} while {h.holder} held it (since seq {h.hold_seq})",
                )
            h.holder, h.hold_seq, h.hold_t = taker, seq, ev.t
            h.bound = self._recorded_by(h.holder)
        elif after in (IN_REPAIR, QUARANTINED):
            h.holder, h.hold_seq, h.hold_t, h.bound = after, seq, ev.t, None
        elif not was_down:
            h.holder, h.hold_seq, h.hold_t, h.bound = None, seq, ev.t, None  # taken, no owner
        if after in HELD_STATES and h.holder not in (None, *NOT_MAINTENANCE_OWNERS):
            self.planned.add(name)
        else:
            self.planned.discard(name)

    def _checked(self, seq: int, ev: Event, name: str) -> None:
        """A visit in place is no visit of a held host: the host serves, nobody holds it."""
        self.checks += 1
        h = self.host(name)
        if h.state != IN_SERVICE or h.holder is not None:
            self.flag(
                "checked_while_held",
                name,
                ev,
                seq,
                f"checked in place by {ev.actor} while {h.state}"
                + (f" and held by {h.holder}" if h.holder else ""),
            )

    def _missing(self, name: str, targets: Mapping[str, str]) -> list[str]:
        have = self.versions.get(name, INITIAL_VERSIONS)
        # switch_firmware is the rack switch's: a host never carries it (see switch_updated)
        wanted = host_targets(targets)
        return sorted(f"{c}={v}" for c, v in wanted.items() if have.get(c) != v)

    def _recorded_by(self, owner: str) -> dict[str, str]:
        return {c: v for c, v in self.targets.items() if self.target_setter.get(c) == owner}

    def _check_return(self, seq: int, ev: Event, name: str, h: _Host, before: str) -> None:
        """A host going back to service carries what its returner was bound to give it."""
        if before == IN_REPAIR:
            wanted, who = self.targets, "repair"
        elif h.updated_since_out and h.holder and not h.rolled_back:
            holder = h.holder
            wanted = self._recorded_by(holder) if h.bound is None else h.bound
            # Owed only while still in force: a target withdrawn since (a blamed version a
            # rollback took out of the record, a rollout ended mid-visit) is owed no more.
            wanted = {c: v for c, v in wanted.items() if self.targets.get(c) == v}
            if h.declared:  # the visit's own targets (a rollout's version over the train's)
                wanted = {c: h.declared.get(c, v) for c, v in wanted.items()}
            who = holder
        else:
            return  # released untouched: not visited yet, nothing was due from this owner
        missing = self._missing(name, wanted)
        if missing:
            self.flag(
                "stale_return",
                name,
                ev,
                seq,
                f"returned to service from {before} by {who} without {', '.join(missing)}",
            )

    def _check_scope(self, seq: int, ev: Event, owner: str) -> None:
        targets, hosts = self.scopes[owner]
        for name in hosts:
            state = self.hosts[name].state if name in self.hosts else IN_SERVICE
            if state in (IN_REPAIR, QUARANTINED):
                continue
            missing = self._missing(name, targets)
            if missing:
                self.flag(
                    "scope_incomplete",
                    name,
                    ev,
                    seq,
                    f"{owner} closed as succeeded with {name} {state} without "
                    + ", ".join(missing),
                )

    def _check_budget(self, seq: int, ev: Event, name: str, d: Mapping[str, object]) -> None:
        rack, zone = self.where(name)
        checks = (
            ("cluster", self.name, self.down, d.get("limit")),
            ("rack", rack, self.down_rack.get(rack, 0), d.get("per_rack")),
            ("zone", zone, self.down_zone.get(zone, 0), d.get("per_zone")),
            ("planned work of", self.name, len(self.planned), d.get("maintenance")),
        )
        for level, scope, count, limit in checks:
            if isinstance(limit, int | float) and count > limit:
                self.flag(
                    "budget_exceeded",
                    name,
                    ev,
                    seq,
                    f"{count} hosts out of service in {level} {scope} after cordon by "
                    f"{d.get('owner') or ev.actor}, budget {limit}",
                )

    def _job_start(self, seq: int, ev: Event) -> None:
        job = int(ev.detail["job"])
        names = ev.detail.get("hosts") or []
        self.jobs[job] = frozenset(names)
        if not self.upper or len(set(map(self.upper.get, names))) == 1:
            return  # all on INITIAL_UPPER, or all on one changed version
        seen = Counter(self.upper.get(n, INITIAL_UPPER) for n in names)
        if len(seen) > 1:
            mix = ", ".join(f"{drv}/{cuda} x{k}" for (drv, cuda), k in sorted(seen.items()))
            self.flag(
                "mixed_versions",
                None,
                ev,
                seq,
                f"job {job} started on mixed gpu_driver/cuda: {mix}",
            )

    def _updated(self, seq: int, ev: Event) -> None:
        assert ev.host is not None
        h = self.host(ev.host)
        after = ev.detail.get("after") or {}
        h.updated_since_out, h.verified_ok = True, False
        declared = ev.detail.get("targets")
        if isinstance(declared, dict) and ev.actor == h.holder:
            h.declared = {str(c): str(v) for c, v in declared.items()}
        if after:
            mine = self.versions.setdefault(ev.host, dict(INITIAL_VERSIONS))
            mine.update({str(c): str(v) for c, v in after.items()})
        if not any(c in after for c in _UPPER):
            return
        old = self.upper.get(ev.host, INITIAL_UPPER)
        new = (str(after.get("gpu_driver", old[0])), str(after.get("cuda", old[1])))
        if new == old:
            return
        # Rare (bulk operations only), so a scan of the running jobs is cheap enough.
        job = next((j for j, hosts in self.jobs.items() if ev.host in hosts), None)
        if job is not None:
            self.flag(
                "mixed_versions",
                ev.host,
                ev,
                seq,
                f"gpu_driver/cuda changed {old[0]}/{old[1]} -> {new[0]}/{new[1]} "
                f"under running job {job}",
            )
        self.upper[ev.host] = new

    # ------------------------------------------------------------- end of log
    def finish(self, last_t: float) -> None:
        for name, h in self.hosts.items():
            if h.state in (IN_SERVICE, IN_REPAIR, QUARANTINED):
                continue
            if h.holder is None:
                why = f"{h.state} since fleet hour {h.hold_t:g} with no owner"
            elif self.closed.get(h.holder, -1) > h.hold_seq:
                why = f"{h.state}, held by {h.holder}, which has closed"
            else:
                continue  # an open maintenance still holds it
            self.violations.append(
                Violation(
                    kind="host_lost", cluster=self.name, host=name, t=last_t, seq=0, detail=why
                )
            )


def audit_events(
    events: Iterable[tuple[int, Event, str]],
    domains: Mapping[str, tuple[str, str]] | None = None,
) -> AuditReport:
    """Replay ``(seq, event, cluster)`` in order and report every broken invariant.

    ``domains`` maps a host to its (rack, zone); without it they come from the host's name.
    """
    replays: dict[str, _ClusterReplay] = {}
    checked = 0  # events
    last_t = 0.0
    for seq, ev, cluster in events:
        rep = replays.get(cluster)
        if rep is None:
            rep = replays[cluster] = _ClusterReplay(cluster, domains)
        rep.apply(seq, ev)
        checked += 1
        last_t = max(last_t, ev.t)
    violations: list[Violation] = []
    for rep in replays.values():
        rep.finish(last_t)
        violations.extend(rep.violations)
    violations.sort(key=lambda v: (v.seq == 0, v.seq, v.cluster, v.host or ""))
    return AuditReport(
        ok=not violations,
        violations=violations,
        events_checked=checked,
        hosts_checked_in_place=sum(rep.checks for rep in replays.values()),
    )


def audit(fleet: FleetBackend, cluster: str | None = None) -> AuditReport:
    """Audit the fleet's whole record, or one cluster's (KeyError naming an unknown one)."""
    if cluster is not None and cluster not in fleet.cluster_names():
        raise KeyError(f"cluster: unknown cluster {cluster!r}")
    return audit_events(fleet.records(cluster=cluster), fleet.failure_domains(cluster))
