"""One wave of a cluster's operation, as commands: drain, check, change, verify, judge, settle.

A wave arrives cordoned (``ops_take_wave``). It drains by the train's policy (the commands of
``DrainSequence``: wait for a job's end or its next checkpoint, up to ``drain.max_wait``, then
evict; with ``drain.negotiate`` the jobs are asked first, and a refusing job's hosts are handed back
to a later wave unless the cut-over is ``consistency: cluster``). An abort that arrives while the
wave drains hands it back untouched (``abort``): nothing has changed yet. The drained hosts are
checked before their change (a host already failing is quarantined and not counted against the
change), changed at once, waited for and verified without returning any. Then the wave is judged:
the build is bad past an explicit ``max_failures`` or, left out, when the failures among the
cluster's changed hosts exceed the fleet's base rate significantly (``planning.failure_gate``), so
one flaky host is quarantined and the wave goes on. A good wave returns its verified hosts and
quarantines the failed ones; a bad one reinstalls every changed host's previous versions, verifies
and returns them (quarantining those that fail even that) and says why the operation must stop. A
``drain-for-repair`` wave only hands its drained hosts to repair.

Like ``drain_sequence`` it is pure and deterministic (it runs inside the ``ClusterOperation``
workflow) and never calls the backend. ``WaveSequence.next`` says what to do next; the workflow
does it and feeds the command's answer back with ``feed`` (None for ``Phase``, ``AwaitInstall``,
the drain's ``WaitUntil``; the answer of ``Look`` is a ``DrainStatus``, of ``Ask`` an
``AskResult``, of ``Evict`` an ``EvictResult``), until ``WaveDone``. The sequence keeps the
cluster's progress and the wave's page in the UI (host -> phase and note) up to date as the
answers arrive.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.contracts.messages import (
    AskResult,
    DrainStatus,
    EvictResult,
    UpdateResult,
    VerifyOutcome,
    VerifyResult,
)
from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.contracts.ops_types import ClusterProgress, TakenWave
from orchestrator.contracts.ui_text import at_hour, job_wait, names, plural, versions
from orchestrator.execution.baseline import HealthBaseline
from orchestrator.execution.batches import judge_batch
from orchestrator.execution.drain import DrainTracker
from orchestrator.execution.drain_sequence import (
    Ask,
    Drained,
    DrainSequence,
    Evict,
    Install,
    Look,
    Release,
    WaitUntil,
)
from orchestrator.planning.failure_gate import judge

#: host of the wave in progress -> (its phase, what it waits for or how it ended), for the UI
WaveView = dict[str, tuple[str, str]]


@dataclass(frozen=True)
class Phase:
    """Move the cluster to ``state`` (search attribute, progress to the operation); a
    ``reason`` replaces the progress's."""

    state: str
    reason: str | None = None


@dataclass(frozen=True)
class CheckHealth:
    """Check ``hosts`` before their change (``check_health``); answer: ``HealthBaseline``."""

    hosts: list[str]
    summary: str


@dataclass(frozen=True)
class Change:
    """Install the spec's targets on ``hosts`` (``apply_updates``); answer: ``UpdateResult``."""

    hosts: list[str]
    summary: str


@dataclass(frozen=True)
class AwaitInstall:
    """Sleep, uninterrupted, until fleet hour ``at_hours`` (it is ``now``): installs finish."""

    at_hours: float
    now: float


@dataclass(frozen=True)
class VerifyChange:
    """Verify ``hosts`` against the targets, returning none (``verify``); answer:
    ``VerifyOutcome``."""

    hosts: list[str]
    summary: str


@dataclass(frozen=True)
class ReturnHosts:
    """Return verified ``hosts`` to service (``return_hosts``); answer: ``VerifyOutcome``."""

    hosts: list[str]
    summary: str


@dataclass(frozen=True)
class Quarantine:
    """Quarantine ``hosts`` for ``reason`` (``quarantine_hosts``); answer: ``VerifyResult``."""

    hosts: list[str]
    reason: str
    summary: str


@dataclass(frozen=True)
class Rollback:
    """Reinstall each host's ``previous`` versions (``rollback``); answer: ``UpdateResult``."""

    previous: dict[str, dict[str, str]]
    summary: str


@dataclass(frozen=True)
class VerifyRollback:
    """Verify ``hosts`` against their ``previous`` versions, returning the passed and
    quarantining the failed for ``reason`` (``verify``); answer: ``VerifyOutcome``."""

    hosts: list[str]
    previous: dict[str, dict[str, str]]
    reason: str
    summary: str


@dataclass(frozen=True)
class HandBackWave:
    """Hand the wave's ``hosts`` back untouched (``release_hosts``): aborted while draining."""

    hosts: list[str]
    summary: str


@dataclass(frozen=True)
class WaveDone:
    """The wave is over: ``stop`` is '' or why the operation must stop (rolled back)."""

    stop: str


DrainStep = Look | Ask | Evict | Release | WaitUntil
WaveCommand = (
    DrainStep
    | Phase
    | CheckHealth
    | Change
    | AwaitInstall
    | VerifyChange
    | ReturnHosts
    | Quarantine
    | Rollback
    | VerifyRollback
    | HandBackWave
    | WaveDone
)
_Steps = Generator[WaveCommand, Any, str]


def mark(view: WaveView, hosts: list[str], phase: str, note: str) -> None:
    for h in hosts:
        view[h] = (phase, note)


def defer_lost(p: ClusterProgress, view: WaveView, lost: Mapping[str, str]) -> bool:
    """Hosts of the wave that left our hands for repair before their change: deferred (repair's
    reimage gives them the change, the fleet's target), not failures. False, with nothing done,
    when there are none."""
    if not lost:
        return False
    for h, why in lost.items():
        mark(view, [h], "deferred", f"left for repair ({why}): takes the change there")
    p.lost_to_repair = sorted({*p.lost_to_repair, *lost})
    p.deferred_hosts = sorted({*p.deferred_hosts, *lost})
    p.hosts_deferred = len(p.deferred_hosts)
    return True


class WaveSequence:
    """One cordoned wave, from its drain to its end (see the module docstring)."""

    def __init__(
        self,
        wave: TakenWave,
        spec: OperationSpec,
        owner: str,
        progress: ClusterProgress,
        rollback_batches: bool = True,
        batch_stops: bool = True,
    ) -> None:
        self.wave, self.spec, self.owner, self.p = wave, spec, owner, progress
        #: hosts rolled back at a time (the spec's ``rollback_batch``; None: the whole wave,
        #: as a run recorded before rollback batches does: ``rollback_batches`` False)
        self.rollback_batch = spec.rollback_batch if rollback_batches else None
        #: failed batches in a row stop the operation (``batch.failure_threshold``); False only
        #: for runs recorded before they did, which went on
        self.batch_stops = batch_stops
        #: host of the wave -> (its phase, what it waits for or how it ended), for the UI
        self.view: WaveView = {}
        progress.wave_hosts, progress.fleet_hours = len(wave.hosts), wave.fleet_hours
        progress.waiting_for = []
        mark(self.view, wave.hosts, "cordoned", "cordoned; looking at its jobs")
        self._steps = self._run()
        self._current: WaveCommand = next(self._steps)

    def next(self) -> WaveCommand:
        """The command to do now; ``WaveDone`` once the wave is over."""
        return self._current

    def feed(self, answer: object = None) -> None:
        """The answer to the command ``next`` gave (see the module docstring)."""
        try:
            self._current = self._steps.send(answer)
        except StopIteration as done:
            self._current = WaveDone(done.value)

    def abort(self) -> None:
        """Stop a wave that is still draining (its next command is a ``Look``): its hosts go
        back untouched, and the operation goes on to its end."""
        assert isinstance(self._current, Look), "only a draining wave is aborted"
        self._steps = self._hand_back()
        self._current = next(self._steps)

    # ------------------------------------------------------------------ drain
    def _tracker(self) -> DrainTracker:
        drain = self.spec.drain
        return DrainTracker(
            self.wave.fleet_hours + drain.max_wait_hours,
            negotiate=drain.negotiate,
            max_refusals=drain.max_refusals,
            # A refusing job's hosts go back to a later wave, as trains do, unless the cut-over
            # is ``consistency: cluster``: a second wave would leave the cluster on two versions,
            # so its refusing jobs are waited for (up to ``drain.max_wait``, then evicted).
            release=drain.negotiate and self.spec.consistency != "cluster",
        )

    def _drain(self) -> Generator[WaveCommand, Any, list[str]]:
        """Free the wave's hosts of jobs as the train does: the drained ones."""
        seq = DrainSequence(list(self.wave.hosts), self._tracker(), together=True)
        while not isinstance(cmd := seq.next(), Drained):
            if isinstance(cmd, Install):  # the whole wave is drained: it changes together
                return cmd.hosts
            if isinstance(cmd, Evict):
                for w in seq.waits:
                    if w.job_id in cmd.job_ids:
                        mark(self.view, w.hosts, "evicting", f"evicting job {w.job_id}")
            answer = yield cmd
            if isinstance(cmd, Look):
                self._looked(seq, answer)
            elif isinstance(cmd, Evict):
                evicted: EvictResult = answer
                self.p.jobs_interrupted += evicted.interrupted
            elif isinstance(cmd, Ask):
                self._heard(seq, cmd, answer)
            elif isinstance(cmd, Release):
                note = "its job said not now: handed back, a later wave"
                mark(self.view, cmd.hosts, "re-queued", note)
                self.p.hosts_requeued += len(cmd.hosts)
        return []

    def _looked(self, seq: DrainSequence, st: DrainStatus) -> None:
        now = self.p.fleet_hours = st.fleet_hours
        defer_lost(self.p, self.view, st.lost)  # they went to repair: deferred
        mark(self.view, st.ready, "ready", "free of jobs; waiting for the rest of the wave")
        for w in st.waits:
            mark(self.view, w.hosts, "draining", job_wait(w.job_id, w.action, w.at_hours, now))
        seq.looked(st)

    def _heard(self, seq: DrainSequence, ask: Ask, asked: AskResult) -> None:
        """Fold the jobs' answers in; show each one's answer and resulting wait."""
        seq.heard(ask, asked)
        assert seq.tracker is not None
        talks = seq.tracker.describe()
        for w in seq.waits:
            if str(w.job_id) in talks:
                mark(self.view, w.hosts, "draining", f"job {w.job_id} {talks[str(w.job_id)]}")

    def _hand_back(self) -> _Steps:
        """An aborted drain: the wave's hosts go back untouched and the wave is over."""
        hosts = self.wave.hosts
        yield HandBackWave(hosts, f"abort: hand back the {plural(len(hosts), 'host')} of the wave")
        self.p.wave_hosts = 0
        self.view.clear()
        return ""

    # ----------------------------------------------------------------- change
    def _repair(self, ready: list[str]) -> _Steps:
        """A ``drain-for-repair`` wave: its drained hosts go to repair, which is its change."""
        why = f"drained for repair by {self.owner}"
        q: VerifyResult = yield Quarantine(
            ready, why, f"hand {plural(len(ready), 'host')} to repair"
        )
        self.p.hosts_changed += len(q.quarantined)
        self.p.waves_done, self.p.wave_hosts = self.p.waves_done + 1, 0
        return ""

    def _run(self) -> _Steps:
        yield Phase("draining", "")
        ready = yield from self._drain()
        if self.spec.kind == "drain-for-repair":
            return (yield from self._repair(ready))
        p, targets = self.p, self.spec.targets
        gate = self.spec.max_failures is None
        ready = yield from self._check_health(ready)
        mark(self.view, ready, "changing", f"installing {versions(targets)}")
        yield Phase("updating")
        summary = f"change {plural(len(ready), 'host')} ({names(ready, 3)}) to {versions(targets)}"
        upd = self._without_lost((yield Change(ready, summary)))
        for h, why in upd.failed.items():
            mark(self.view, [h], "failed", f"install failed: {why}")
        if upd.updated:
            until = at_hour(upd.fleet_hours + upd.duration_hours, upd.fleet_hours)
            mark(self.view, upd.updated, "changing", f"install and reboot until {until}")
            yield AwaitInstall(upd.fleet_hours + upd.duration_hours, upd.fleet_hours)
        mark(self.view, upd.updated, "verifying", "diagnostics, bandwidth and version checks")
        yield Phase("verifying")
        summary = f"verify the wave's {plural(len(upd.updated), 'host')}"
        ver: VerifyOutcome = yield VerifyChange(upd.updated, summary)
        for h, why in ver.failed.items():
            mark(self.view, [h], "failed", f"verification failed: {why}")
        mark(self.view, ver.passed, "verified", "passed; returns with the wave")
        failed = {**upd.failed, **ver.failed}
        p.failures += len(failed)
        over = self._judge(len(ready)) if gate else self._over_max_failures()
        if over:
            return (yield from self._roll_back(upd, failed, over))
        stop = yield from self._return(ver.passed, failed, gate)
        return stop if self.batch_stops else ""

    def _check_health(self, ready: list[str]) -> Generator[WaveCommand, Any, list[str]]:
        """Check the drained hosts before their change; the healthy ones (the rest quarantined).

        A host already failing diagnostics or bandwidth is its own failure, not the change's:
        the check quarantines it (repair takes it, and gives it the targets); it is not counted.
        """
        p = self.p
        mark(self.view, ready, "checking", "diagnostics and bandwidth before the change")
        yield Phase("checking")
        summary = f"check {plural(len(ready), 'host')} before the change"
        health: HealthBaseline = yield CheckHealth(ready, summary)
        defer_lost(p, self.view, health.gone)
        for h, why in health.unhealthy.items():
            mark(self.view, [h], "failed", why)
        p.hosts_quarantined += len(health.unhealthy)
        p.hosts_failing_before += len(health.unhealthy)
        p.base_rate = health.base_rate
        return health.healthy

    def _return(self, passed: list[str], failed: dict[str, str], gate: bool) -> _Steps:
        """A good wave: the verified hosts back to service, the failed ones quarantined."""
        p = self.p
        summary = f"return {plural(len(passed), 'verified host')} to service"
        back: VerifyOutcome = yield ReturnHosts(passed, summary)
        mark(self.view, back.passed, "returned", "changed and verified, back in service")
        for h, why in {**failed, **back.failed}.items():
            mark(self.view, [h], "quarantined", why)
        why = "operation check failed"
        if gate:  # the host's record says why it, and not the build, is taken out
            why += f" ({p.gate_reason})"
        yield from self._quarantine({**failed, **back.failed}, why)
        p.hosts_changed += len(back.passed)
        p.waves_done, p.wave_hosts = p.waves_done + 1, 0
        return self._fold_batch(len(back.passed), len({**failed, **back.failed}))

    def _roll_back(self, upd: UpdateResult, failed: dict[str, str], over: str) -> _Steps:
        """Put every changed host of the wave back on its previous versions, ``rollback_batch``
        hosts at a time (each batch reinstalled, verified and returned before the next); why
        we stop."""
        p = self.p
        yield Phase("rolling_back")
        yield from self._quarantine(upd.failed, "install failed")  # nothing installed on them
        previous = {h: self.wave.previous[h] for h in upd.updated}
        mark(self.view, list(previous), "rolling back", "reinstalling its previous versions")
        hosts = list(previous)
        size = self.rollback_batch or max(len(hosts), 1)
        returned = lost = 0
        for i in range(0, max(len(hosts), 1), size):
            batch = {h: previous[h] for h in hosts[i : i + size]}
            back, rb = yield from self._roll_back_batch(batch)
            returned, lost = returned + len(back.passed), lost + len(back.failed) + len(rb.failed)
        p.wave_hosts = 0
        sample = "; ".join(f"{h}: {why}" for h, why in sorted(failed.items())[:2])
        return (
            f"wave {p.waves_done + 1}: {len(failed)} of {len(self.wave.hosts)} "
            f"hosts failed ({sample}{'; ...' if len(failed) > 2 else ''}), "
            f"{over}; wave rolled back: "
            f"{returned} hosts back on their previous versions, "
            f"{lost + len(upd.failed)} quarantined"
        )

    def _roll_back_batch(
        self, previous: dict[str, dict[str, str]]
    ) -> Generator[WaveCommand, Any, tuple[VerifyOutcome, UpdateResult]]:
        """Reinstall, verify and return one batch of rolled-back hosts."""
        p = self.p
        summary = f"roll {plural(len(previous), 'host')} back to their previous versions"
        rb: UpdateResult = yield Rollback(previous, summary)
        if rb.updated:
            yield AwaitInstall(rb.fleet_hours + rb.duration_hours, rb.fleet_hours)
        summary = f"verify and return {plural(len(rb.updated), 'rolled-back host')}"
        reason = f"{self.owner}: failed after rollback"
        back: VerifyOutcome = yield VerifyRollback(rb.updated, previous, reason, summary)
        mark(self.view, back.passed, "rolled back", "back on its previous versions, in service")
        for h, why in back.failed.items():
            mark(self.view, [h], "quarantined", f"failed after rollback: {why}")
        p.hosts_quarantined += len(back.failed)
        yield from self._quarantine(rb.failed, "rollback failed")
        p.hosts_rolled_back += len(back.passed)
        return back, rb

    def _quarantine(self, hosts: Mapping[str, str], why: str) -> _Steps:
        if hosts:
            held = sorted(hosts)
            yield Quarantine(held, f"{self.owner}: {why}", f"quarantine {names(held, 3)}: {why}")
            self.p.hosts_quarantined += len(hosts)
        return ""

    # -------------------------------------------------------------- judgement
    def _without_lost(self, upd: UpdateResult) -> UpdateResult:
        """An install's result without the hosts repair took before it (deferred, not failed)."""
        if not defer_lost(self.p, self.view, upd.lost):
            return upd
        failed = {h: why for h, why in upd.failed.items() if h not in upd.lost}
        return upd.model_copy(update={"failed": failed})

    def _over_max_failures(self) -> str:
        """An explicit ``max_failures``: '' or why stop."""
        limit = self.spec.max_failures or 0
        if self.p.failures > limit:
            return f"{self.p.failures} failures above max_failures {limit}"
        return ""

    def _fold_batch(self, verified: int, failed: int) -> str:
        """With a ``batch`` policy: the next wave's size after this one, and '' or why failed
        batches in a row stop the rollout (``orchestrator.execution.batches``)."""
        policy, p = self.spec.batch, self.p
        if policy is None:
            return ""
        done = (p.already_done + p.hosts_changed) / max(1, p.hosts_in_scope)
        # It grows from the size asked, not the wave's (rounded up to whole jobs, or cut down
        # to the budget), so the sizes asked go 2, 4, 8, ... whatever the jobs.
        asked = p.batch_size or policy.start
        p.batch_sizes = [*p.batch_sizes, asked]
        verdict = judge_batch(policy, asked, verified, failed, p.batch_failures_in_row, done)
        p.batch_size, p.batch_failures_in_row = verdict.next_size, verdict.failures_in_row
        return verdict.stop

    def _judge(self, changed: int) -> str:
        """The bad-build rule over the cluster's changed hosts so far: '' or why stop."""
        p = self.p
        p.gate_changed += changed
        verdict = judge(p.failures, p.gate_changed, p.base_rate)
        p.gate_threshold, p.gate_reason = verdict.threshold, verdict.reason
        return verdict.reason if verdict.bad else ""
