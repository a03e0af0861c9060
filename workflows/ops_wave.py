"""The steps of a ``ClusterOperation``: fleet calls, progress, waits, and one wave end to end.

A wave arrives cordoned (``ops_take_wave``). It drains by the train's policy (reusing
``drain_status`` and ``evict_jobs``: wait for a job's end or its next checkpoint, up to
``drain.max_wait``, then evict), checks every drained host's health before its change (a host
already failing is quarantined and not counted against the change), changes the healthy ones at
once, verifies them all without returning any, then either returns the verified hosts and
quarantines the failed ones, or, when the build is judged bad, reinstalls every changed host's
previous versions, verifies and returns them (quarantining those that fail even that), and says
why the operation must stop. The build is bad past an explicit ``max_failures``; left out, when
the failures among the cluster's changed hosts exceed the fleet's base rate significantly
(``planning.failure_gate``), so one flaky host is quarantined and the wave goes on. An abort
that arrives while the wave drains hands it back untouched: nothing has changed yet.

Kept apart from the workflow's entity logic (``workflows.cluster_operation``) so each reads on
its own; this module is passed through the sandbox like ``fleet_clock``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import CancelledError

from activities.fleet_activities import FleetActivities
from activities.ops_activities import OpsActivities
from orchestrator.contracts.messages import (
    AskRequest,
    AskResult,
    DrainStatus,
    EvictRequest,
    EvictResult,
    HostsRequest,
    UpdateResult,
    VerifyOutcome,
    VerifyResult,
)
from orchestrator.contracts.ops_types import (
    ClusterOpInput,
    ClusterProgress,
    OpsRequest,
    TakenWave,
    VerifyRequest,
)
from orchestrator.contracts.search_attributes import TRAIN_PHASE
from orchestrator.contracts.ui_text import at_hour, job_wait, names, plural, versions
from orchestrator.execution.drain import DrainTracker
from orchestrator.execution.drain_sequence import (
    Ask,
    Drained,
    DrainSequence,
    Evict,
    Install,
    Look,
    Release,
)
from orchestrator.ops.ui import cluster_details
from workflows.fleet_timing import (
    capped_poll_seconds,
    fleet_hours_now,
    fleet_options,
    sleep_until,
)
from workflows.ops_wave_failures import WaveFailures

#: Fleet hours between two looks at the arbiter or the budget while waiting (doubling, capped).
POLL_FLEET_HOURS = 0.25
MAX_POLL_FLEET_HOURS = 2.0
#: Never poll faster than this in wall time, however fast the fleet clock runs.
MIN_POLL_WALL_SECONDS = 0.5


class WaveSteps(WaveFailures):
    """Mixed into ``ClusterOperation``: everything but its entity logic."""

    inp: ClusterOpInput
    p: ClusterProgress
    abort: str
    poked: bool
    _published: dict[str, Any]
    #: host of the wave in progress -> (phase, what it waits for or how it ended), for the UI
    wave_view: dict[str, tuple[str, str]]

    # ----------------------------------------------------------------- helpers
    async def _call(
        self, fn: Callable[..., Any], arg: Any, heartbeat: bool = False, summary: str | None = None
    ) -> Any:
        return await workflow.execute_activity_method(
            fn, arg, summary=summary, **fleet_options(heartbeat)
        )

    def _show(self) -> None:
        """This cluster's page in the UI: progress, waits, the wave's hosts (not a command)."""
        workflow.set_current_details(
            cluster_details(self.inp.spec, self.inp.operation_id, self.p, self.wave_view)
        )

    def _mark(self, hosts: list[str], phase: str, note: str) -> None:
        for h in hosts:
            self.wave_view[h] = (phase, note)

    def _req(self) -> OpsRequest:
        i = self.inp
        return OpsRequest(
            spec=i.spec,
            cluster=i.cluster,
            owner=i.operation_id,
            wall=workflow.now(),
            since_hours=self.p.started_hours,
            grant=self.p.granted_hosts,
        )

    def _hosts(self, hosts: list[str], **kw: Any) -> HostsRequest:
        i = self.inp
        return HostsRequest(
            cluster=i.cluster, owner=i.operation_id, hosts=hosts, wall=workflow.now(), **kw
        )

    def _verify(self, hosts: list[str], **kw: Any) -> VerifyRequest:
        i = self.inp
        return VerifyRequest(
            cluster=i.cluster, owner=i.operation_id, wall=workflow.now(), hosts=hosts, **kw
        )

    async def _phase(self, state: str, reason: str | None = None) -> None:
        """Move to ``state``: search attribute for the UI, progress to the operation."""
        if reason is not None:
            self.p.reason = reason
        if state != self.p.state:
            workflow.upsert_search_attributes([TRAIN_PHASE.value_set(state)])
        self.p.state = state
        self._show()
        now = self.p.model_dump(exclude={"fleet_hours"})
        parent = workflow.info().parent
        if parent is None or now == self._published:
            return
        self._published = now
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                "cluster_progress", self.p
            )
        except (asyncio.CancelledError, CancelledError):
            raise
        except Exception as err:  # the operation may have ended: progress is best effort
            workflow.logger.warning("progress not delivered: %s", err)

    async def _wait_fleet(
        self, target: float, now: float, interruptible: bool = True, look: bool = False
    ) -> None:
        """Wait until fleet hour ``target``; a control message cuts an interruptible wait short.
        ``look``: a drain's wait, which the caller follows with a look, so on a fleet that
        changes outside trainctl it lasts at most ``MAX_POLL_WALL_SECONDS``."""
        clock = self.inp.clock
        if not interruptible:
            await sleep_until(clock, target, now)
            return
        delay = (target - max(now, fleet_hours_now(clock))) * 3600.0 / clock.speed
        if delay > 0:
            await self._nap(capped_poll_seconds(clock, delay) if look else delay)

    async def _poll(self, hours: float) -> None:
        """Look again in ``hours`` of fleet time (never faster than MIN_POLL_WALL_SECONDS, never
        slower than ``MAX_POLL_WALL_SECONDS`` of wall time)."""
        clock = self.inp.clock
        await self._nap(
            capped_poll_seconds(clock, max(MIN_POLL_WALL_SECONDS, hours * 3600.0 / clock.speed))
        )

    async def _nap(self, seconds: float) -> None:
        self.poked = False
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self.poked or bool(self.abort), timeout=timedelta(seconds=seconds)
            )

    async def _drain(self, wave: TakenWave) -> list[str] | None:
        """Free the wave's hosts of jobs as the train does (``DrainSequence``): the drained
        ones, None if aborted meanwhile."""
        drain = self.inp.spec.drain
        talks = drain.negotiate
        tracker = DrainTracker(
            wave.fleet_hours + drain.max_wait_hours,
            negotiate=talks,
            max_refusals=drain.max_refusals,
            # Handing a refusing job's hosts back to a later wave, as trains do.
            release=talks and not self._whole_cluster(),
        )
        seq = DrainSequence(list(wave.hosts), tracker, together=True)
        while not isinstance(cmd := seq.next(), Drained):
            if isinstance(cmd, Look):
                if self.abort:
                    return None
                await self._look(seq, cmd)
            elif isinstance(cmd, Install):  # the whole wave is drained: it changes together
                return cmd.hosts
            elif isinstance(cmd, Evict):
                await self._evict(seq, cmd)
            elif isinstance(cmd, Ask):
                await self._ask(seq, cmd)
            elif isinstance(cmd, Release):
                await self._release_refused(cmd)
            else:
                await self._wait_fleet(cmd.at_hours, cmd.now, look=True)
        return []

    def _whole_cluster(self) -> bool:
        """A ``consistency: cluster`` cut-over, which hands no refusing job's hosts back: its
        refusing jobs are waited for (up to ``drain.max_wait``, then evicted), since a second
        wave would leave the cluster on two versions."""
        return self.inp.spec.consistency == "cluster"

    async def _look(self, seq: DrainSequence, cmd: Look) -> None:
        st: DrainStatus = await self._call(
            FleetActivities.drain_status,
            self._hosts(cmd.hosts, deadline_hours=cmd.deadline_hours),
            summary=f"drain check of {plural(len(cmd.hosts), 'host')} of {self.inp.cluster}",
        )
        now = self.p.fleet_hours = st.fleet_hours
        if not self._defer_lost(st.lost):  # runs recorded before: only shown
            for host, why in st.lost.items():
                self._mark([host], "deferred", f"left for repair ({why}): takes the change there")
        self._mark(st.ready, "ready", "free of jobs; waiting for the rest of the wave")
        for w in st.waits:
            self._mark(w.hosts, "draining", job_wait(w.job_id, w.action, w.at_hours, now))
        self._show()
        seq.looked(st)  # lost ones went to repair: deferred

    async def _evict(self, seq: DrainSequence, cmd: Evict) -> None:
        req = EvictRequest(
            cluster=self.inp.cluster,
            owner=self.inp.operation_id,
            job_ids=cmd.job_ids,
            wall=workflow.now(),
            scheduled_hours=cmd.scheduled_hours,
        )
        for w in seq.waits:
            if w.job_id in cmd.job_ids:
                self._mark(w.hosts, "evicting", f"evicting job {w.job_id}")
        res: EvictResult = await self._call(
            FleetActivities.evict_jobs,
            req,
            summary=f"evict job {names([str(j) for j in cmd.job_ids])}",
        )
        self.p.jobs_interrupted += res.interrupted

    async def _ask(self, seq: DrainSequence, cmd: Ask) -> None:
        """Ask the jobs before evicting them; show each one's answer and resulting wait."""
        req = AskRequest(
            cluster=self.inp.cluster,
            owner=self.inp.operation_id,
            wall=workflow.now(),
            planned=cmd.planned,
            deadline_hours=cmd.deadline_hours,
            max_refusals=cmd.max_refusals,
            refusals=cmd.refusals,
            finals=cmd.finals,
            release=cmd.release,
        )
        asked: AskResult = await self._call(
            FleetActivities.ask_jobs, req, summary=f"ask {plural(len(cmd.planned), 'job')} first"
        )
        seq.heard(cmd, asked)
        assert seq.tracker is not None
        talks = seq.tracker.describe()
        for w in seq.waits:
            if str(w.job_id) in talks:
                self._mark(w.hosts, "draining", f"job {w.job_id} {talks[str(w.job_id)]}")
        self._show()

    async def _release_refused(self, cmd: Release) -> None:
        """Hand the hosts of jobs that said "not now" back untouched: a later wave takes them
        again once the job may be asked again (``take_wave`` leaves them until then), so the
        operation still covers its whole scope."""
        await self._call(
            FleetActivities.release_hosts,
            self._hosts(cmd.hosts, visit=False),
            summary=f"hand back {plural(len(cmd.hosts), 'host')} of job "
            f"{names([str(j) for j in sorted(cmd.jobs)])}: not now, a later wave",
        )
        self._mark(cmd.hosts, "re-queued", "its job said not now: handed back, a later wave")
        self.p.hosts_requeued += len(cmd.hosts)
        self._show()

    async def _run_wave(self, wave: TakenWave) -> str:
        """Drain, change, verify and return (or roll back) one wave; '' or why to stop."""
        spec, p = self.inp.spec, self.p
        p.wave_hosts, p.fleet_hours, p.waiting_for = len(wave.hosts), wave.fleet_hours, []
        self.wave_view = {}
        self._mark(wave.hosts, "cordoned", "cordoned; looking at its jobs")
        await self._phase("draining", "")
        ready = await self._drain(wave)
        if ready is None:  # aborted before anything changed: hand the wave back untouched
            await self._call(
                FleetActivities.release_hosts,
                self._hosts(wave.hosts, visit=False),
                summary=f"abort: hand back the {plural(len(wave.hosts), 'host')} of the wave",
            )
            p.wave_hosts, self.wave_view = 0, {}
            return ""
        if spec.kind == "drain-for-repair":
            why = f"drained for repair by {self.inp.operation_id}"
            q: VerifyResult = await self._call(
                FleetActivities.quarantine_hosts,
                self._hosts(ready, reason=why),
                summary=f"hand {plural(len(ready), 'host')} to repair",
            )
            p.hosts_changed += len(q.quarantined)
            p.waves_done, p.wave_hosts = p.waves_done + 1, 0
            return ""
        ready = await self._check_health(ready)
        gate = spec.max_failures is None
        self._mark(ready, "changing", f"installing {versions(spec.targets)}")
        await self._phase("updating")
        upd: UpdateResult = await self._call(
            FleetActivities.apply_updates,
            self._hosts(ready, targets=spec.targets, visit=False),
            heartbeat=True,
            summary=f"change {plural(len(ready), 'host')} ({names(ready, 3)}) to "
            f"{versions(spec.targets)}",
        )
        upd = self._without_lost(upd)
        for h, why in upd.failed.items():
            self._mark([h], "failed", f"install failed: {why}")
        if upd.updated:
            until = at_hour(upd.fleet_hours + upd.duration_hours, upd.fleet_hours)
            self._mark(upd.updated, "changing", f"install and reboot until {until}")
        self._show()
        if upd.updated:
            await self._wait_fleet(upd.fleet_hours + upd.duration_hours, upd.fleet_hours, False)
        self._mark(upd.updated, "verifying", "diagnostics, bandwidth and version checks")
        await self._phase("verifying")
        ver: VerifyOutcome = await self._call(
            OpsActivities.verify,
            self._verify(upd.updated, targets=spec.targets),
            summary=f"verify the wave's {plural(len(upd.updated), 'host')}",
        )
        for h, why in ver.failed.items():
            self._mark([h], "failed", f"verification failed: {why}")
        self._mark(ver.passed, "verified", "passed; returns with the wave")
        failed = {**upd.failed, **ver.failed}
        p.failures += len(failed)
        over = self._judge(len(ready)) if gate else self._over_max_failures()
        if over:
            return await self._roll_back(wave, upd, failed, over)
        back: VerifyOutcome = await self._call(
            OpsActivities.return_hosts,
            self._verify(ver.passed),
            summary=f"return {plural(len(ver.passed), 'verified host')} to service",
        )
        self._mark(back.passed, "returned", "changed and verified, back in service")
        for h, why in {**failed, **back.failed}.items():
            self._mark([h], "quarantined", why)
        why = "operation check failed"
        if gate:  # the host's record says why it, and not the build, is taken out
            why += f" ({p.gate_reason})"
        await self._quarantine({**failed, **back.failed}, why)
        p.hosts_changed += len(back.passed)
        p.waves_done, p.wave_hosts = p.waves_done + 1, 0
        return ""
