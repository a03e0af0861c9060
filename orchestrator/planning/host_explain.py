""" "Why is this host not updated?": one host's targets, who covers them, and what blocks each.

Operators of every fleet ask it ("nodes stay upgrade-required for weeks with no explanation").
The answer is built from what the fleet itself records, so it works whichever backend holds the
fleet and whether or not Temporal answers:

- the cluster's recorded targets and who recorded each (a train), and the scopes of operations
  still open (``Coverage``, read once from the cluster's append-only record);
- the host as the backend holds it (state, owner, reason, versions, the job on it);
- optionally what a covering train says of itself (paused, halted, its window, when it expects to
  finish its cycle), when its workflow answers a query (``TrainFacts``).

Each target the host lacks gets one blocker, the first that applies in the order an on-call
engineer would check: quarantine, repair, work in progress (or the job in its quiet hours
that work waits for), a version marked bad, nobody covering it, the train paused or halted,
its window, an exclusive operation it is parked behind, a job in its quiet hours, the job on
the host, the budget, and otherwise its turn in the cycle. Pure functions over plain data,
tested directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import JobView


class RecordEvent(Protocol):
    """What this module reads of one event of a cluster's record (any backend's)."""

    @property
    def t(self) -> float: ...
    @property
    def actor(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def detail(self) -> Mapping[str, Any]: ...


#: Blocker kinds, in the order they are checked (and ``--behind`` groups them).
KINDS = (
    "quarantine",
    "repair",
    "in_progress",
    "bad_version",
    "no_owner",
    "train_halted",
    "train_paused",
    "window",
    "operation",
    "quiet_job",
    "job",
    "budget",
    "queued",
)


@dataclass
class Coverage:
    """Who wants what on one cluster, from its record."""

    recorded: dict[str, str] = field(default_factory=dict)
    """The cluster's recorded targets (repair reimages a host with them)."""
    setters: dict[str, tuple[str, float]] = field(default_factory=dict)
    """component -> (owner that recorded its target, fleet hour it did)."""
    scopes: dict[str, tuple[dict[str, str], frozenset[str], float]] = field(default_factory=dict)
    """Open operations -> (targets, hosts, fleet hour the scope was recorded)."""
    closed: set[str] = field(default_factory=set)
    """Owners whose close is recorded (and that opened nothing since)."""
    budgets: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    """owner -> (floor, maintenance budget) its latest cordon carried."""

    def fold(self, ev: RecordEvent) -> None:
        """Take one event of the cluster's record, in order."""
        d = ev.detail
        if ev.kind == "targets":
            new = {str(c): str(v) for c, v in (d.get("targets") or {}).items()}
            for c, v in new.items():
                if self.recorded.get(c) != v:
                    self.setters[c] = (ev.actor, ev.t)
            for c in [c for c in self.setters if c not in new]:
                self.setters.pop(c)
            self.recorded = new
            self.closed.discard(ev.actor)
        elif ev.kind == "operation_scope":
            owner = str(d.get("owner") or ev.actor)
            targets = {str(c): str(v) for c, v in (d.get("targets") or {}).items()}
            self.scopes[owner] = (targets, frozenset(map(str, d.get("hosts") or [])), ev.t)
            self.closed.discard(owner)
        elif ev.kind == "owner_closed":
            owner = str(d.get("owner") or "")
            self.closed.add(owner)
            self.scopes.pop(owner, None)
        elif ev.kind == "host_state" and d.get("limit") is not None and d.get("owner"):
            limit, maintenance = d.get("limit"), d.get("maintenance")
            self.budgets[str(d["owner"])] = (
                int(limit) if isinstance(limit, int | float) else None,
                int(maintenance) if isinstance(maintenance, int | float) else None,
            )
            self.closed.discard(str(d["owner"]))


def coverage_of(events: Iterable[RecordEvent]) -> Coverage:
    """The coverage a cluster's record adds up to."""
    cov = Coverage()
    for ev in events:
        cov.fold(ev)
    return cov


@dataclass(frozen=True)
class HostFacts:
    """One host as the backend holds it, and the cluster around it."""

    name: str
    cluster: str
    state: str
    owner: str
    reason: str
    versions: Mapping[str, str]
    now: float
    job: JobView | None = None
    repair_until: float | None = None
    out_of_service: int = 0
    planned: int = 0
    """Hosts of the cluster held for planned work by anyone (the maintenance budget's count)."""


@dataclass(frozen=True)
class TrainFacts:
    """What a covering train says of itself (its status query), when it answers."""

    phase: str
    reason: str = ""
    cluster: str = ""
    targets: Mapping[str, str] = field(default_factory=dict)
    """Its own targets: it covers them even before it records them (one waiting for its
    window has taken no host yet)."""
    rollouts: tuple[tuple[Mapping[str, str], frozenset[str] | None], ...] = ()
    """The campaigns' rollouts riding it, in arrival order: (targets, hosts; None: every host).
    A canary's targets are never the cluster's recorded ones, so only these name them."""
    window_state: str = ""
    next_window_hours: float | None = None
    cycle_end_hours: float | None = None
    resting: bool = False
    """Every host it covers was on its targets at its last look: no cycle runs."""
    rest_until_hours: float | None = None
    """While resting: when its first health visit falls due (None: only a change wakes it)."""
    waiting: str = ""
    """Why it took nothing at its last look (its status's ``waiting``: the arbiter's reason
    while an exclusive operation has the cluster)."""

    def behind_operations(self) -> tuple[str, list[str]]:
        """How the train is parked behind other holders of the cluster (``handing over``: to
        an exclusive operation; ``serialised``: itself exclusive, behind those ahead) and whom
        it waits for; ``("", [])`` when it is not."""
        for how, prefix in (
            ("handing over", "handing over to "),
            ("serialised", "serialised behind "),
        ):
            if self.waiting.startswith(prefix):
                return how, [w for w in self.waiting[len(prefix) :].split(", ") if w]
        return "", []

    def rest_line(self) -> str:
        """``resting until ...``: what a resting train waits for ('' when it is not resting)."""
        if not self.resting:
            return ""
        if self.rest_until_hours is not None:
            return f"resting until its first health visit at fleet hour {self.rest_until_hours:.1f}"
        return "resting until new targets, a rollout or a host needing updates"


@dataclass(frozen=True)
class Blocker:
    kind: str
    detail: str
    until_hours: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "detail": self.detail, "until_hours": self.until_hours}


@dataclass(frozen=True)
class TargetAnswer:
    component: str
    want: str
    have: str | None
    covered_by: str | None
    blocked_by: Blocker | None
    since_hours: float | None = None
    """Fleet hour the target was recorded (how long the host has been waiting for it)."""

    def to_json(self) -> dict[str, object]:
        return {
            "component": self.component,
            "want": self.want,
            "have": self.have,
            "covered_by": self.covered_by,
            "blocked_by": None if self.blocked_by is None else self.blocked_by.to_json(),
            "since_hours": self.since_hours,
        }


def wanted(
    host: HostFacts, cov: Coverage, trains: Mapping[str, TrainFacts] | None = None
) -> list[tuple[str, str, str | None, float | None]]:
    """(component, version, covering owner, since) of every target covering ``host``: the
    cluster's recorded targets, a live train's own over them, then open operations' scopes."""
    out: dict[str, tuple[str, str | None, float | None]] = {}
    for c, v in sorted(cov.recorded.items()):
        owner, t = cov.setters.get(c, ("", None))
        out[c] = (v, owner or None, t)
    for owner, train in sorted((trains or {}).items()):
        if train.cluster == host.cluster and train.phase not in ("stopping", "stopped"):
            for c, v in sorted(train.targets.items()):
                if out.get(c, ("",))[0] != v:
                    out[c] = (v, owner, None)
            for targets, hosts in train.rollouts:  # a later rollout wins, as the train's does
                if hosts is None or host.name in hosts:
                    out.update({c: (v, owner, None) for c, v in targets.items()})
    out.pop("switch_firmware", None)  # the rack switch's, never a host's
    for owner, (targets, hosts, t) in sorted(cov.scopes.items()):
        if host.name in hosts:
            for c, v in sorted(targets.items()):
                out[c] = (v, owner, t)
    return [(c, v, who, t) for c, (v, who, t) in sorted(out.items())]


def explain_host(
    host: HostFacts,
    cov: Coverage,
    bad: Mapping[tuple[str, str], str] | None = None,
    trains: Mapping[str, TrainFacts] | None = None,
) -> list[TargetAnswer]:
    """Every target covering ``host``: what it has, who covers it, and what blocks it (None
    when it is on target). ``bad``: (component, version) -> why, of versions marked bad;
    ``trains``: owner -> what it says of itself, for those that answered."""
    out = []
    for c, v, who, since in wanted(host, cov, trains):
        have = host.versions.get(c)
        blocker = None
        if have != v:
            blocker = _blocker(host, cov, c, v, who, bad or {}, (trains or {}).get(who or ""))
        out.append(TargetAnswer(c, v, have, who, blocker, since))
    return out


def _blocker(
    host: HostFacts,
    cov: Coverage,
    component: str,
    version: str,
    who: str | None,
    bad: Mapping[tuple[str, str], str],
    train: TrainFacts | None,
) -> Blocker:
    if host.state == HostState.QUARANTINED:
        return Blocker(
            "quarantine",
            f"quarantined: {host.reason or 'no reason recorded'}; repair triages it, and a host "
            "back from repair gets every recorded target before it serves",
        )
    if host.state == HostState.IN_REPAIR:
        return Blocker(
            "repair",
            f"in repair ({host.reason or 'no reason recorded'}); it comes back with every "
            "recorded target",
            host.repair_until,
        )
    if host.state in HELD_STATES and host.owner:
        quiet = _quiet_blocker(host)  # its holder's drain waits for the quiet hours to end
        if quiet is not None:
            return quiet
        return Blocker("in_progress", f"{host.state} by {host.owner} now: {host.reason}".strip())
    why_bad = bad.get((component, version))
    if why_bad is not None:
        return Blocker(
            "bad_version",
            f"{component}={version} is marked bad fleet-wide ({why_bad}): nothing installs it; "
            f"clear it (`trainctl versions clear {component}={version} --reason ...`) or change "
            "the target",
        )
    if who is None or who in cov.closed:
        by = f"recorded by {who}, which has ended" if who else "recorded by nobody running"
        return Blocker(
            "no_owner",
            f"{component}={version} is {by}: no train or operation will install it; start one "
            f"(`trainctl train start --spec ...` for cluster {host.cluster})",
        )
    stopped = _train_blocker(host, who, train) if train is not None else None
    if stopped is not None:
        return stopped
    return _turn_blocker(host, cov, who, train)


def _quiet_blocker(host: HostFacts) -> Blocker | None:
    """The job on the host, when it is in its quiet hours: no drain evicts it before they end
    unless the host's deadline forces it (its last visit plus the train's ``cycle_target``)."""
    job = host.job
    until = None if job is None else job.quiet_until_hours
    if job is None or until is None or until <= host.now:
        return None
    return Blocker(
        "quiet_job",
        f"job {job.id} ({job.size} hosts) is in its quiet hours until fleet hour {until:.1f} "
        "(quiet_until=): drains wait for them to end unless the host's deadline (its last "
        "visit plus cycle_target) comes first",
        until,
    )


def _turn_blocker(host: HostFacts, cov: Coverage, who: str, train: TrainFacts | None) -> Blocker:
    """What keeps a host its covering owner would take from being taken yet: the job on it,
    a full budget, a resting train's next look, or its turn in the cycle."""
    job = host.job
    quiet = _quiet_blocker(host)
    if quiet is not None:
        return quiet
    if job is not None:
        return Blocker(
            "job",
            f"job {job.id} ({job.size} hosts) runs on it: a job-aware train waits for its next "
            f"checkpoint at fleet hour {job.next_checkpoint_hours:.1f} or its end at "
            f"{job.end_hours:.1f}, evicting it only past its drain deadline",
            job.next_checkpoint_hours,
        )
    limit, maintenance = cov.budgets.get(who, (None, None))
    if limit is not None and host.out_of_service >= limit:
        return Blocker(
            "budget",
            f"{host.out_of_service} hosts of {host.cluster} are out of service, the floor of "
            f"{limit}: no new cordon until one comes back",
        )
    if maintenance is not None and host.planned >= maintenance:
        return Blocker(
            "budget",
            f"{host.planned} hosts of {host.cluster} are held for planned work, the maintenance "
            f"budget of {maintenance}: no new cordon until one comes back",
        )
    if train is not None and train.resting:
        return Blocker(
            "queued",
            f"{who} is {train.rest_line()}: its next look (within a fleet hour) sees this host "
            "behind and starts a cycle that takes it",
        )
    until = train.cycle_end_hours if train is not None else None
    return Blocker("queued", f"due in {who}'s cycle: it takes the host in its turn", until)


def _train_blocker(host: HostFacts, who: str | None, train: TrainFacts) -> Blocker | None:
    """What the covering train's own state blocks: halted or paused, outside its window, or
    parked behind an exclusive operation (None when it is taking hosts)."""
    if train.phase in ("halted", "paused", "stopping", "stopped"):
        kind = "train_halted" if train.phase == "halted" else "train_paused"
        verb = "resume" if train.phase in ("halted", "paused") else "start"
        return Blocker(
            kind,
            f"{who} is {train.phase}: {train.reason or 'no reason given'}; run `trainctl train "
            f"{verb} --cluster {host.cluster}` once the cause is dealt with",
        )
    if train.window_state in ("waiting", "blackout"):
        return Blocker(
            "window",
            f"{who} is outside its maintenance window ({train.window_state}); it takes hosts "
            "again when the next window opens",
            train.next_window_hours,
        )
    how, ahead = train.behind_operations()
    if ahead:
        what = (
            f"{ahead[0]}, an exclusive operation that runs alone on {host.cluster}"
            if how == "handing over"
            else f"{' and '.join(ahead)} to hand back their hosts first"
        )
        ops = [a for a in ahead if a.startswith("ops-")]
        see = f" (`trainctl ops status --id {ops[0]}`)" if ops else ""
        return Blocker("operation", f"{who} waits for {what}: it takes no host until then{see}")
    return None


def eta_hours(answers: Iterable[TargetAnswer], now: float) -> float | None:
    """When the host is expected on every target: the latest of its blockers' ends (None when
    one has no known end); ``now`` when it is on every target already."""
    ends = [a.blocked_by.until_hours for a in answers if a.blocked_by is not None]
    if not ends:
        return now
    if any(e is None for e in ends):
        return None
    return max(e for e in ends if e is not None)
