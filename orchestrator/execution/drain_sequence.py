"""One drain sequence: what to do next with a set of held hosts, as commands.

The steps of a drain exist once (``drain``: ``drain_status``, ``DrainTracker``, ask and evict;
``install``; ``settle``); this module holds the one sequence that strings them together, so a
change to how a host drains is made here and reaches the train's domains
(``workflows.domain_maintenance``), an operation's waves (``wave_sequence``) and the
simulator (``simulator.sim_domains``) alike. It is pure and deterministic (it runs inside
workflows): it never calls the backend. Its interpreters do, each in its own way: a workflow by
activities and timers, the simulator by calling the backend in virtual time.

``DrainSequence.next`` says what to do next; the interpreter does it and, where the command
asks for an answer, feeds it back (``looked`` after a ``Look``, ``heard`` after an ``Ask``):

- ``Look``: read the hosts still draining (``drain_status``), then ``looked(status)``;
- ``Install``: these hosts are free of jobs: their maintenance starts (``maintain_steps``);
  with ``together`` (a rack visit, an operation's wave) once, when every host is drained;
- ``Ask``: ask the jobs before evicting them (``ask_jobs``), then ``heard(ask, answers)``;
- ``Evict``: evict the jobs now (``evict_jobs``);
- ``Release``: hand a refusing job's hosts back untouched; they are asked again later (a train
  plans them again, an operation re-queues them to a later wave);
- ``WaitUntil``: sleep until the fleet hour (or until woken), then look again;
- ``Drained``: nothing is left draining.

After an install, ``maintain_steps`` says what follows: ``Quarantine`` the hosts it failed on,
``WaitUntil`` the install is over, ``Verify`` (and settle: return the passed, quarantine the
rest). ``DrainSequence.abort`` is the ``HandBack`` of every host not yet handed on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from orchestrator.contracts.messages import (
    AskRequest,
    AskResult,
    DrainStatus,
    JobWait,
    UpdateResult,
)
from orchestrator.execution.drain import DrainDecision, DrainTracker


@dataclass(frozen=True)
class Look:
    """Read the drain of ``hosts`` (``drain_status``, with the tracker's deadline)."""

    hosts: list[str]
    deadline_hours: float


@dataclass(frozen=True)
class Install:
    """``hosts`` are free of jobs: install their updates (then ``maintain_steps``)."""

    hosts: list[str]


@dataclass(frozen=True)
class Ask:
    """Ask these jobs before evicting them, each told its ``planned`` instant."""

    planned: dict[int, float]
    deadline_hours: float
    max_refusals: int
    refusals: dict[int, int]
    finals: dict[int, float]
    release: bool

    def request(self, cluster: str, owner: str, wall: datetime) -> AskRequest:
        """The ``ask_jobs`` activity's input for this command."""
        return AskRequest(
            cluster=cluster,
            owner=owner,
            wall=wall,
            planned=self.planned,
            deadline_hours=self.deadline_hours,
            max_refusals=self.max_refusals,
            refusals=self.refusals,
            finals=self.finals,
            release=self.release,
        )


@dataclass(frozen=True)
class Evict:
    job_ids: list[int]
    #: job -> the fleet hour its eviction was decided for (``evict_jobs``' ``scheduled_hours``)
    scheduled_hours: dict[int, float]


@dataclass(frozen=True)
class Release:
    """Hand ``hosts`` back untouched: their ``jobs`` refused, and will be asked again later."""

    jobs: dict[int, list[str]]
    hosts: list[str]


@dataclass(frozen=True)
class WaitUntil:
    """Sleep until fleet hour ``at_hours`` (it is ``now``), then go on."""

    at_hours: float
    now: float


@dataclass(frozen=True)
class Quarantine:
    """Quarantine ``hosts`` (held by us) for ``reason``, or a host's own in ``reasons``."""

    hosts: list[str]
    reason: str
    #: host -> its whole reason ("update failed: ... timed out after 20s"), where known
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Verify:
    """Verify ``hosts`` against their targets and settle them: the passed back to service,
    the failed quarantined."""

    hosts: list[str]


@dataclass(frozen=True)
class HandBack:
    """Give ``hosts`` back: untouched ones to service, touched ones verified first."""

    hosts: list[str]


@dataclass(frozen=True)
class Drained:
    """No host is left draining."""


Command = Look | Install | Ask | Evict | Release | WaitUntil | Quarantine | Verify | HandBack
DrainCommand = Look | Install | Ask | Evict | Release | WaitUntil | Drained


@dataclass
class DrainSequence:
    """The drain of one set of held hosts, from cordoned to free of jobs.

    Made without a ``tracker`` (a train's domain learns its deadline from its first look), the
    first ``Look`` only reads the fleet's hour: ``begin`` then sets the tracker, and the
    sequence looks again with the real deadline.
    """

    pending: list[str]
    tracker: DrainTracker | None = None
    #: hold drained hosts and hand them on together once all are drained (rack visit, wave)
    together: bool = False
    #: drained hosts held for ``together``
    drained: list[str] = field(default_factory=list)
    #: host -> why it left our hands while draining (repair took it)
    lost: dict[str, str] = field(default_factory=dict)
    #: hosts handed back for their job's refusal
    released: list[str] = field(default_factory=list)
    #: the latest look's waits and fleet hour
    waits: list[JobWait] = field(default_factory=list)
    now: float = 0.0
    _todo: list[DrainCommand] = field(default_factory=list)

    def begin(self, tracker: DrainTracker) -> None:
        self.tracker = tracker

    def next(self) -> DrainCommand:
        """The next command; ``Drained`` once nothing is left to do."""
        if self._todo:
            return self._todo.pop(0)
        if self.pending:
            deadline = self.tracker.deadline_hours if self.tracker is not None else 0.0
            return Look(list(self.pending), deadline)
        if self.drained:
            hosts, self.drained = self.drained, []
            return Install(hosts)
        return Drained()

    def looked(self, st: DrainStatus) -> None:
        """Fold one look in: drained hosts go on (``Install``), lost ones leave, and the
        tracker's decision about the jobs still running becomes the next command."""
        self.now, self.waits = st.fleet_hours, list(st.waits)
        if self.tracker is None:  # the first look: its hour sets the deadline (``begin``)
            return
        self.lost.update(st.lost)
        for host in [*st.lost, *st.ready]:
            self.pending.remove(host)
        if st.ready and self.together:
            self.drained += st.ready
        elif st.ready:
            self._todo.append(Install(list(st.ready)))
        cmd = self._command(self.tracker.decide(st.waits, st.fleet_hours))
        if cmd is not None:
            self._todo.append(cmd)

    def heard(self, ask: Ask, asked: AskResult) -> None:
        """Fold the answers to an ``Ask`` in."""
        assert self.tracker is not None
        self.tracker.heard(asked.answers, ask.planned, asked.fleet_hours)

    def abort(self) -> HandBack:
        """Stop draining: every host not yet handed on goes back."""
        hosts = [*self.pending, *self.drained]
        self.pending, self.drained, self._todo = [], [], []
        return HandBack(hosts)

    def _command(self, d: DrainDecision) -> DrainCommand | None:
        t = self.tracker
        assert t is not None
        if d.release:
            hosts = [h for job_hosts in d.release.values() for h in job_hosts if h in self.pending]
            if not hosts:
                return None
            for h in hosts:
                self.pending.remove(h)
            self.released += hosts
            return Release(d.release, hosts)
        if d.evict:
            return Evict(list(d.evict), dict(d.scheduled_hours))
        if d.ask:
            return Ask(
                planned=dict(d.ask),
                deadline_hours=t.deadline_hours,
                max_refusals=t.max_refusals,
                refusals={j: k.refusals for j, k in t.talks.items() if j in d.ask},
                finals={j: f for j, f in t.finals.items() if j in d.ask},
                release=t.release,
            )
        if d.wake_at_hours is not None:
            return WaitUntil(d.wake_at_hours, self.now)
        return None


def maintain_steps(upd: UpdateResult) -> list[Command]:
    """What follows an install: quarantine the hosts it failed on, wait until the installed
    ones are done (the longest install of the batch), verify and settle them."""
    out: list[Command] = []
    if upd.failed:
        why = "update failed"
        out.append(
            Quarantine(list(upd.failed), why, {h: f"{why}: {r}" for h, r in upd.failed.items()})
        )
    if upd.updated:
        out.append(WaitUntil(upd.fleet_hours + upd.duration_hours, upd.fleet_hours))
        out.append(Verify(list(upd.updated)))
    return out
