"""The steps of a ``ClusterOperation``: fleet calls, progress, waits, and one wave end to end.

A wave arrives cordoned (``ops_take_wave``). It drains by the train's policy (reusing
``drain_status`` and ``evict_jobs``: wait for a job's end or its next checkpoint, up to
``drain.max_wait``, then evict), changes every host at once, verifies them all without
returning any, then either returns the verified hosts and quarantines the failed ones, or, past
``max_failures``, reinstalls every changed host's previous versions, verifies and returns them
(quarantining those that fail even that), and says why the operation must stop. An abort that
arrives while the wave drains hands it back untouched: nothing has changed yet.

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
from orchestrator.execution.drain import DrainTracker
from orchestrator.execution.messages import (
    DrainStatus,
    EvictRequest,
    EvictResult,
    HostsRequest,
    UpdateResult,
    VerifyOutcome,
    VerifyResult,
)
from orchestrator.ops.types import (
    ClusterOpInput,
    ClusterProgress,
    OpsRequest,
    RollbackRequest,
    TakenWave,
    VerifyRequest,
)
from orchestrator.search_attributes import TRAIN_PHASE
from workflows.fleet_clock import clock_party, fleet_hours_now, fleet_options, sleep_until

#: Fleet hours between two looks at the arbiter or the budget while waiting (doubling, capped).
POLL_FLEET_HOURS = 0.25
MAX_POLL_FLEET_HOURS = 2.0
#: Never poll faster than this in wall time, however fast the fleet clock runs.
MIN_POLL_WALL_SECONDS = 0.5


class WaveSteps:
    """Mixed into ``ClusterOperation``: everything but its entity logic."""

    inp: ClusterOpInput
    p: ClusterProgress
    abort: str
    poked: bool
    _published: dict[str, Any]

    # ----------------------------------------------------------------- helpers
    async def _call(self, fn: Callable[..., Any], arg: Any, heartbeat: bool = False) -> Any:
        return await workflow.execute_activity_method(fn, arg, **fleet_options(heartbeat))

    def _req(self) -> OpsRequest:
        i = self.inp
        return OpsRequest(spec=i.spec, cluster=i.cluster, owner=i.operation_id, wall=workflow.now())

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

    async def _wait_fleet(self, target: float, now: float, interruptible: bool = True) -> None:
        """Wait until fleet hour ``target``; a control message cuts an interruptible wait short."""
        clock = self.inp.clock
        if clock.logical:  # a party of this cluster's own clock (not the bulk operation's first)
            party_clock = clock.model_copy(update={"cluster": self.inp.cluster})
            await clock_party(party_clock, owner=self.inp.operation_id).wait(target)
            return
        if not interruptible:
            await sleep_until(clock, target, now)
            return
        delay = (target - max(now, fleet_hours_now(clock))) * 3600.0 / clock.speed
        if delay > 0:
            await self._nap(delay)

    async def _poll(self, hours: float) -> None:
        """Look again in ``hours`` of fleet time (never faster than MIN_POLL_WALL_SECONDS)."""
        clock, now = self.inp.clock, self.p.fleet_hours
        if clock.logical:  # a logical clock moves only when every party on the cluster waits
            party_clock = clock.model_copy(update={"cluster": self.inp.cluster})
            await clock_party(party_clock, owner=self.inp.operation_id).wait(now + hours)
            self.p.fleet_hours = now + hours
            return
        await self._nap(max(MIN_POLL_WALL_SECONDS, hours * 3600.0 / clock.speed))

    async def _nap(self, seconds: float) -> None:
        self.poked = False
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self.poked or bool(self.abort), timeout=timedelta(seconds=seconds)
            )

    async def _drain(self, wave: TakenWave) -> list[str] | None:
        """Free the wave's hosts of jobs as the train does; None if aborted meanwhile."""
        pending, ready = list(wave.hosts), []
        tracker = DrainTracker(wave.fleet_hours + self.inp.spec.drain.max_wait_hours)
        while pending:
            if self.abort:
                return None
            st: DrainStatus = await self._call(
                FleetActivities.drain_status,
                self._hosts(pending, deadline_hours=tracker.deadline_hours),
            )
            now = self.p.fleet_hours = st.fleet_hours
            for host in [*st.lost, *st.ready]:
                pending.remove(host)  # lost ones went to repair: deferred
            ready += st.ready
            decision = tracker.decide(st.waits, now)
            if decision.evict:
                req = EvictRequest(
                    cluster=self.inp.cluster,
                    owner=self.inp.operation_id,
                    job_ids=decision.evict,
                    wall=workflow.now(),
                    scheduled_hours=decision.scheduled_hours,
                )
                res: EvictResult = await self._call(FleetActivities.evict_jobs, req)
                self.p.jobs_interrupted += res.interrupted
            elif decision.wake_at_hours is not None:
                await self._wait_fleet(decision.wake_at_hours, now)
        return ready

    async def _run_wave(self, wave: TakenWave) -> str:
        """Drain, change, verify and return (or roll back) one wave; '' or why to stop."""
        spec, p = self.inp.spec, self.p
        p.wave_hosts, p.fleet_hours, p.waiting_for = len(wave.hosts), wave.fleet_hours, []
        await self._phase("draining", "")
        ready = await self._drain(wave)
        if ready is None:  # aborted before anything changed: hand the wave back untouched
            await self._call(FleetActivities.release_hosts, self._hosts(wave.hosts, visit=False))
            p.wave_hosts = 0
            return ""
        if spec.kind == "drain-for-repair":
            why = f"drained for repair by {self.inp.operation_id}"
            q: VerifyResult = await self._call(
                FleetActivities.quarantine_hosts, self._hosts(ready, reason=why)
            )
            p.hosts_changed += len(q.quarantined)
            p.waves_done, p.wave_hosts = p.waves_done + 1, 0
            return ""
        await self._phase("updating")
        upd: UpdateResult = await self._call(
            FleetActivities.apply_updates,
            self._hosts(ready, targets=spec.targets, visit=False),
            heartbeat=True,
        )
        if upd.updated:
            await self._wait_fleet(upd.fleet_hours + upd.duration_hours, upd.fleet_hours, False)
        await self._phase("verifying")
        ver: VerifyOutcome = await self._call(
            OpsActivities.verify, self._verify(upd.updated, targets=spec.targets)
        )
        failed = {**upd.failed, **ver.failed}
        p.failures += len(failed)
        if p.failures > spec.max_failures:
            return await self._roll_back(wave, upd, failed)
        back: VerifyOutcome = await self._call(OpsActivities.return_hosts, self._verify(ver.passed))
        await self._quarantine({**failed, **back.failed}, "operation check failed")
        p.hosts_changed += len(back.passed)
        p.waves_done, p.wave_hosts = p.waves_done + 1, 0
        return ""

    async def _quarantine(self, hosts: dict[str, str], why: str) -> None:
        if hosts:
            reason = f"{self.inp.operation_id}: {why}"
            await self._call(
                FleetActivities.quarantine_hosts, self._hosts(sorted(hosts), reason=reason)
            )
            self.p.hosts_quarantined += len(hosts)

    async def _roll_back(self, wave: TakenWave, upd: UpdateResult, failed: dict[str, str]) -> str:
        """Put every changed host of the wave back on its previous versions; why we stop."""
        p, spec = self.p, self.inp.spec
        await self._phase("rolling_back")
        await self._quarantine(upd.failed, "install failed")  # nothing installed on them
        previous = {h: wave.previous[h] for h in upd.updated}
        rb: UpdateResult = await self._call(
            OpsActivities.rollback,
            RollbackRequest(
                cluster=self.inp.cluster,
                owner=self.inp.operation_id,
                wall=workflow.now(),
                previous=previous,
            ),
            heartbeat=True,
        )
        if rb.updated:
            await self._wait_fleet(rb.fleet_hours + rb.duration_hours, rb.fleet_hours, False)
        back: VerifyOutcome = await self._call(
            OpsActivities.verify,
            self._verify(
                rb.updated,
                per_host=previous,
                return_passed=True,
                quarantine_failed=True,
                reason=f"{self.inp.operation_id}: failed after rollback",
            ),
        )
        p.hosts_quarantined += len(back.failed)
        await self._quarantine(rb.failed, "rollback failed")
        p.hosts_rolled_back += len(back.passed)
        p.wave_hosts = 0
        sample = "; ".join(f"{h}: {why}" for h, why in sorted(failed.items())[:2])
        return (
            f"wave {p.waves_done + 1}: {len(failed)} of {len(wave.hosts)} "
            f"hosts failed ({sample}{'; ...' if len(failed) > 2 else ''}), "
            f"{p.failures} failures above max_failures {spec.max_failures}; wave rolled back: "
            f"{len(back.passed)} hosts back on their previous versions, "
            f"{len(back.failed) + len(rb.failed) + len(upd.failed)} quarantined"
        )
