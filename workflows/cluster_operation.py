"""One cluster of a bulk operation (id ``<op id>-<cluster>``): waves cut over whole, or rolled back.

It plans the cluster (a refusal fails it, with the reason), records the targets in the fleet so
hosts out for repair take them before they return, pre-stages packages on hosts still in
service, then takes the cluster's capacity arbiter exclusively: trains hand over (the wait is
visible as ``waiting`` with ``waiting_for``) and the operation runs its waves alone, pacing them
by the arbiter's grant, the room outages leave in the budget (at most ``max_wait_for_room``), the
spec's maintenance windows, and pause and abort. Each wave is the plan's next (``follow_planned``)
cordoned atomically (``ops_take_wave``), drained by the train's policy (``DrainSequence``; an
abort meanwhile hands it back untouched), then checked, changed, verified and judged as a whole
(``WaveSequence``): returned, or rolled back to each host's previous versions, which stops the
operation. This workflow interprets both sequences' commands. Whatever happens, the ``finally``
hands back anything still held, restores the fleet's targets unless the operation succeeded, and
leaves the arbiter, so every host ends on its old or its new versions, in service or
quarantined; then it tells the operation it is done (``cluster_done``), which is how an operation
that has continued as new learns the outcome of a child it no longer holds a handle to.

Between two waves (it holds no cordoned host then), once the server suggests it or the history
passes ``max_history_events``, it continues as new, carrying its progress, the targets to
restore, its place in the arbiter (kept: the arbiter knows holders by name and workflow id, which
continue-as-new keeps), pause/abort and its back-off; the ``finally`` does not run for that. The
next run re-plans the rest of the cluster and goes on with the next wave.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from activities.ops_activities import OpsActivities
    from orchestrator.contracts.arbiter_types import AcquireRequest, Grant, ReleaseRequest
    from orchestrator.contracts.errors import NO_ROOM, OPERATION_REFUSED, WAVE_ROLLED_BACK
    from orchestrator.contracts.messages import EvictRequest, HostsRequest
    from orchestrator.contracts.ops_types import (
        OPERATION_ABORTED,
        ClusterControl,
        ClusterOpInput,
        ClusterOpState,
        ClusterPlanView,
        ClusterProgress,
        OpsRequest,
        RollbackRequest,
        TakenWave,
        TakeWaveRequest,
        TargetsRequest,
        VerifyRequest,
    )
    from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from orchestrator.contracts.ui_text import names, plural
    from orchestrator.execution.batches import batch_of
    from orchestrator.execution.drain_sequence import Ask, Evict, Look, Release, WaitUntil
    from orchestrator.execution.soak import Soak, wave_hold
    from orchestrator.execution.wave_pacing import follow_plan
    from orchestrator.execution.wave_sequence import (
        AwaitInstall,
        Change,
        CheckHealth,
        DrainStep,
        HandBackWave,
        Phase,
        Quarantine,
        ReturnHosts,
        Rollback,
        VerifyChange,
        VerifyRollback,
        WaveCommand,
        WaveDone,
        WaveSequence,
    )
    from orchestrator.ops.ui import cluster_details, no_room_text, room_wait_text
    from workflows.fleet_timing import (
        capped_poll_seconds,
        fleet_call,
        fleet_hours_now,
        history_full,
        sleep_until,
    )

#: Fleet hours between two looks at the arbiter or the budget while waiting (doubling, capped).
POLL_FLEET_HOURS = 0.25
MAX_POLL_FLEET_HOURS = 2.0
#: Never poll faster than this in wall time, however fast the fleet clock runs.
MIN_POLL_WALL_SECONDS = 0.5


@workflow.defn(name="ClusterOperation")
class ClusterOperation:
    @workflow.init
    def __init__(self, inp: ClusterOpInput) -> None:
        self.inp = inp
        s = inp.state or ClusterOpState(progress=ClusterProgress(cluster=inp.cluster))
        self.p = s.progress
        self.paused = s.paused
        self.abort = s.abort
        self.poked = False
        self.in_arbiter = s.in_arbiter
        self.targets_set = s.targets_set
        self.idle = s.idle
        #: The planned waves not yet run (None: waves cut at run time, as before ops-planned-waves)
        self.planned: list[list[str]] | None = s.planned
        #: The grant ``waves_total`` was planned with (None: the spec's budget).
        self.planned_with: int | None = s.progress.granted_hosts
        self.continuing = False
        #: the progress last sent to the operation (sent again only when it changes)
        self._published: dict[str, Any] = {}
        #: host of the wave in progress -> (phase, what it waits for or how it ended), for the UI
        self.wave_view: dict[str, tuple[str, str]] = {}

    @workflow.query(name="status")
    def status(self) -> ClusterProgress:
        return self.p

    @workflow.signal(name="control")
    def control(self, msg: ClusterControl) -> None:
        """Pause, resume or abort, from the operation (which validated it)."""
        if msg.action == "abort":
            self.abort = msg.reason or "aborted by operator"
        else:
            self.paused = msg.action == "pause"
        self.poked = True

    # --------------------------------------------------------------------- run
    @workflow.run
    async def run(self, inp: ClusterOpInput) -> ClusterProgress:
        self.p.workflow_id = workflow.info().workflow_id
        workflow.upsert_search_attributes(
            [TRAIN_CLUSTER.value_set(inp.cluster), TRAIN_CAMPAIGN.value_set(inp.operation_id)]
        )
        succeeded = False
        recorded: dict[str, str | None] = dict(inp.state.recorded_targets) if inp.state else {}
        try:
            view: ClusterPlanView
            if inp.state is not None:  # a continued run: planned, targets set, prestaged
                view = await fleet_call(OpsActivities.plan_cluster, self._req())
            else:
                view = await self._start(recorded)
            failure = await self._waves(view)
            if failure:
                raise ApplicationError(failure, type=WAVE_ROLLED_BACK, non_retryable=True)
            if self.continuing:
                await workflow.wait_condition(workflow.all_handlers_finished)
            else:
                succeeded = not self.abort
                await self._phase("succeeded" if succeeded else "aborted", self.abort)
        except (asyncio.CancelledError, CancelledError):
            self.continuing = False  # cancelled on the way out: close after all
            self.p.state, self.p.reason = "aborted", "cancelled"
            workflow.upsert_search_attributes([TRAIN_PHASE.value_set("aborted")])
            raise
        except FailureError as err:
            cause = err.cause if isinstance(err, ActivityError) else err
            why = cause.message if isinstance(cause, FailureError) else str(err)
            await self._phase("failed", why)
            kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
            raise ApplicationError(
                why, self.p.model_dump(mode="json"), type=kind, non_retryable=True
            ) from None
        finally:
            if not self.continuing:
                await self._close(None if succeeded else recorded)
                await self._report_done()
        if self.continuing:
            workflow.continue_as_new(self._next_input(recorded))
        if self.p.state == "aborted":
            # Aborted is not completed: the workflow list shows it Failed, with the reason
            # and the final progress as the error's details (the parent reads them back).
            raise ApplicationError(
                self.p.reason or "aborted",
                self.p.model_dump(mode="json"),
                type=OPERATION_ABORTED,
                non_retryable=True,
            )
        return self.p

    async def _start(self, recorded: dict[str, str | None]) -> ClusterPlanView:
        """Plan, record the targets (``recorded`` gets what they were before) and prestage."""
        inp = self.inp
        await self._phase("planning")
        if inp.spec.batch is None and workflow.patched("ops-planned-waves"):
            self.planned = []  # the first plan's waves are the ones it runs
        view: ClusterPlanView = await fleet_call(
            OpsActivities.plan_cluster,
            self._req(),
            summary=f"plan the waves of {inp.cluster}",
        )
        if view.refused:
            raise ApplicationError(view.refused, type=OPERATION_REFUSED, non_retryable=True)
        self.p.hosts_in_scope, self.p.already_done = view.hosts_in_scope, view.already_done
        self.p.started_hours = view.fleet_hours
        recorded.update(view.recorded_targets)
        if inp.spec.targets:
            self.targets_set = True
            await fleet_call(
                OpsActivities.set_targets,
                TargetsRequest(
                    cluster=inp.cluster,
                    owner=inp.operation_id,
                    wall=workflow.now(),
                    targets=dict(inp.spec.targets),
                ),
            )
            await self._phase("prestaging")
            await fleet_call(
                OpsActivities.prestage,
                self._req(),
                summary=f"pre-stage packages on {inp.cluster}'s hosts in service",
            )
        return view

    # ---------------------------------------------------------- continue-as-new
    def _history_full(self) -> bool:
        return history_full(self.inp.max_history_events)

    def _next_input(self, recorded: dict[str, str | None]) -> ClusterOpInput:
        state = ClusterOpState(
            progress=self.p,
            recorded_targets=recorded,
            targets_set=self.targets_set,
            in_arbiter=self.in_arbiter,
            paused=self.paused,
            abort=self.abort,
            idle=self.idle,
            planned=self.planned,
        )
        return self.inp.model_copy(update={"state": state})

    async def _report_done(self) -> None:
        """Tell the operation this cluster has ended, after everything was handed back.

        The operation may have continued as new since it started this child (and so no longer
        holds its handle); a signal by workflow id reaches its current run.
        """
        parent = workflow.info().parent
        if parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                "cluster_done", self.p
            )
        except (asyncio.CancelledError, CancelledError):
            raise
        except Exception as err:  # the operation has ended (terminated): nobody to tell
            workflow.logger.warning("outcome not delivered: %s", err)

    async def _close(self, restore: dict[str, str | None] | None) -> None:
        """Hand back what is held (verifying touched hosts), restore targets, leave the arbiter."""
        i = self.inp
        # The outcome goes into the record: the audit holds a succeeded operation to its scope.
        await fleet_call(
            FleetActivities.close_owner,
            self._hosts([], visit=False, reason=self.p.state),
            summary=f"hand back any host of {i.cluster} still held ({self.p.state})",
        )
        if restore is not None and self.targets_set:
            await fleet_call(
                OpsActivities.set_targets,
                TargetsRequest(
                    cluster=i.cluster, owner=i.operation_id, wall=workflow.now(), targets=restore
                ),
            )
        if self.in_arbiter:
            await self._release(self.abort or self.p.reason or self.p.state)

    async def _release(self, reason: str) -> None:
        req = ReleaseRequest(cluster=self.inp.cluster, holder=self.inp.operation_id, reason=reason)
        await fleet_call(
            ArbiterActivities.release,
            req,
            summary=f"leave {self.inp.cluster}'s capacity arbiter ({reason})",
        )
        self.in_arbiter = False

    # ------------------------------------------------------------------- waves
    async def _waves(self, view: ClusterPlanView) -> str:
        """Run waves until nothing is left to change; '' or why the operation stopped.

        It also returns '' with ``continuing`` set when the history is full, between two waves.
        """
        while True:
            self.planned_with = follow_plan(self.p, view, self.planned_with, self.inp.cluster)
            self.planned = view.planned if self.planned is not None else None
            if not view.refused and not view.work_left:
                return ""
            if await self._between_waves():
                return ""
            if self._history_full():
                self.continuing = True
                return ""
            if view.waiting_for_room:
                await self._wait_for_room(view)
                view = await fleet_call(
                    OpsActivities.plan_cluster,
                    self._req(),
                    summary=f"look for room in {self.inp.cluster}",
                )
                continue
            self.p.room_wait_since = None
            # It asks for its whole budget: the grant is then the arbiter's share, stable
            # wave after wave, and the rest is planned in waves of that size.
            grant = await self._acquire(view.limit, view.limit)
            if grant and (failure := await self._take_wave(grant, view)):
                return failure
            view = await fleet_call(
                OpsActivities.plan_cluster,
                self._req(),
                summary=f"plan what is left of {self.inp.cluster}",
            )

    async def _take_wave(self, grant: int, view: ClusterPlanView) -> str:
        """Cut a wave of at most ``grant`` hosts and run it, or wait (backing off) when nothing
        can be taken; '' or why the operation stops."""
        wave: TakenWave = await fleet_call(
            OpsActivities.take_wave,
            TakeWaveRequest(
                spec=self.inp.spec,
                cluster=self.inp.cluster,
                owner=self.inp.operation_id,
                wall=workflow.now(),
                max_hold=grant,
                since_hours=self.p.started_hours,
                batch=batch_of(self.inp.spec.batch, self.p.batch_size, grant),
                planned=self.planned,
            ),
            summary=f"cut wave {self.p.waves_done + 1} (up to {grant} hosts) and cordon it",
        )
        if wave.cost is not None:
            self.p.cost = wave.cost
        if wave.hosts:
            self.idle = 0
            self.planned = self.planned[wave.planned_done :] if self.planned else self.planned
            return await self._run_wave(wave)
        self.idle += 1
        self.p.waiting_for = wave.waiting_for
        await self._phase("waiting", wave.waiting or view.refused or "")
        self.p.fleet_hours = wave.fleet_hours
        backoff = min(MAX_POLL_FLEET_HOURS, POLL_FLEET_HOURS * 2**self.idle)
        await self._poll(POLL_FLEET_HOURS if wave.waiting_for else backoff)
        return ""

    # ----------------------------------------------------------------- helpers
    def _show(self) -> None:
        """This cluster's page in the UI: progress, waits, the wave's hosts (not a command)."""
        workflow.set_current_details(
            cluster_details(self.inp.spec, self.inp.operation_id, self.p, self.wave_view)
        )

    def _req(self) -> OpsRequest:
        i = self.inp
        return OpsRequest(
            spec=i.spec,
            cluster=i.cluster,
            owner=i.operation_id,
            wall=workflow.now(),
            since_hours=self.p.started_hours,
            grant=self.p.granted_hosts,
            planned=self.planned,
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

    async def _wait_fleet(self, target: float, now: float, look: bool = False) -> None:
        """Wait until fleet hour ``target``, or until a control message cuts the wait short.
        ``look``: a drain's wait, which the caller follows with a look, so on a fleet that
        changes outside trainctl it lasts at most ``MAX_POLL_WALL_SECONDS``."""
        clock = self.inp.clock
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

    async def _run_wave(self, wave: TakenWave) -> str:
        """Drain, change, verify and return (or roll back) one wave (``WaveSequence``); '' or
        why to stop. An abort while it drains hands it back untouched."""
        spec = self.inp.spec
        batches = spec.rollback_batch is None or workflow.patched("ops-rollback-batch")
        stops = spec.batch is None or workflow.patched("ops-batch-stop")
        seq = WaveSequence(wave, spec, self.inp.operation_id, self.p, batches, stops)
        self.wave_view, changed = seq.view, self.p.hosts_changed
        while not isinstance(cmd := seq.next(), WaveDone):
            if isinstance(cmd, Look) and self.abort:
                seq.abort()
                continue
            if isinstance(cmd, Look | Ask | Evict | Release | WaitUntil):
                seq.feed(await self._drain_step(cmd))
            else:
                seq.feed(await self._wave_step(cmd))
            self._show()
        if self.p.hosts_changed > changed:  # hosts back in service: a ``soak`` starts over
            self.p.last_return_hours = fleet_hours_now(self.inp.clock)
        return cmd.stop

    async def _drain_step(self, cmd: DrainStep) -> Any:
        """One command of the wave's drain (``DrainSequence``); its answer."""
        i = self.inp
        if isinstance(cmd, WaitUntil):
            return await self._wait_fleet(cmd.at_hours, cmd.now, look=True)
        if isinstance(cmd, Look):
            req = self._hosts(cmd.hosts, deadline_hours=cmd.deadline_hours)
            summary = f"drain check of {plural(len(cmd.hosts), 'host')} of {i.cluster}"
            return await fleet_call(FleetActivities.drain_status, req, summary=summary)
        if isinstance(cmd, Evict):
            evict = EvictRequest(
                cluster=i.cluster,
                owner=i.operation_id,
                job_ids=cmd.job_ids,
                wall=workflow.now(),
                scheduled_hours=cmd.scheduled_hours,
            )
            summary = f"evict job {names([str(j) for j in cmd.job_ids])}"
            return await fleet_call(FleetActivities.evict_jobs, evict, summary=summary)
        if isinstance(cmd, Ask):
            ask = cmd.request(i.cluster, i.operation_id, workflow.now())
            summary = f"ask {plural(len(cmd.planned), 'job')} first"
            return await fleet_call(FleetActivities.ask_jobs, ask, summary=summary)
        # A refusing job's hosts go back untouched; a later wave takes them again once the job
        # may be asked again (``take_wave`` leaves them until then).
        summary = (
            f"hand back {plural(len(cmd.hosts), 'host')} of job "
            f"{names([str(j) for j in sorted(cmd.jobs)])}: not now, a later wave"
        )
        req = self._hosts(cmd.hosts, visit=False)
        return await fleet_call(FleetActivities.release_hosts, req, summary=summary)

    async def _wave_step(self, cmd: WaveCommand) -> Any:
        """One command of the wave other than its drain's (``WaveSequence``); its answer."""
        i, targets = self.inp, self.inp.spec.targets
        if isinstance(cmd, Phase):
            return await self._phase(cmd.state, cmd.reason)
        if isinstance(cmd, AwaitInstall):  # not cut short: the hosts are being changed
            return await sleep_until(i.clock, cmd.at_hours, cmd.now)
        if isinstance(cmd, CheckHealth):
            req = self._verify(cmd.hosts, targets=targets, reason=i.operation_id)
            return await fleet_call(OpsActivities.check_health, req, summary=cmd.summary)
        if isinstance(cmd, Change):
            hosts = self._hosts(cmd.hosts, targets=targets, visit=False)
            change = FleetActivities.apply_updates
            return await fleet_call(change, hosts, summary=cmd.summary, heartbeat=True)
        if isinstance(cmd, VerifyChange):
            req = self._verify(cmd.hosts, targets=targets)
            return await fleet_call(OpsActivities.verify, req, summary=cmd.summary)
        if isinstance(cmd, ReturnHosts):
            req = self._verify(cmd.hosts)
            return await fleet_call(OpsActivities.return_hosts, req, summary=cmd.summary)
        if isinstance(cmd, Quarantine):
            hosts = self._hosts(cmd.hosts, reason=cmd.reason)
            return await fleet_call(FleetActivities.quarantine_hosts, hosts, summary=cmd.summary)
        if isinstance(cmd, HandBackWave):
            hosts = self._hosts(cmd.hosts, visit=False)
            return await fleet_call(FleetActivities.release_hosts, hosts, summary=cmd.summary)
        if isinstance(cmd, Rollback):
            back = RollbackRequest(
                cluster=i.cluster, owner=i.operation_id, wall=workflow.now(), previous=cmd.previous
            )
            return await fleet_call(
                OpsActivities.rollback, back, summary=cmd.summary, heartbeat=True
            )
        assert isinstance(cmd, VerifyRollback)
        req = self._verify(
            cmd.hosts,
            per_host=cmd.previous,
            return_passed=True,
            quarantine_failed=True,
            reason=cmd.reason,
        )
        return await fleet_call(OpsActivities.verify, req, summary=cmd.summary)

    # ----------------------------------------------------------------- pacing
    async def _wait_for_room(self, view: ClusterPlanView) -> None:
        """Outages fill the budget: hand the arbiter back and wait for room, visibly, at most
        ``max_wait_for_room`` of fleet time since the wait began; then fail, naming the budget."""
        p, most, room = self.p, self.inp.spec.max_wait_for_room_hours, view.waiting_for_room or ""
        if p.room_wait_since is None:
            p.room_wait_since = view.fleet_hours
        left = p.room_wait_since + most - view.fleet_hours
        # The text is in the progress signalled to the parent whenever it changes.
        readable = workflow.patched("ops-room-wait-text")
        if left <= 0:
            why = no_room_text(room, most, readable)
            raise ApplicationError(why, type=NO_ROOM, non_retryable=True)
        if self.in_arbiter:
            await self._release("waiting for room")
        p.waiting_for = []
        why = room_wait_text(room, left, most, readable)
        await self._phase("waiting_for_room", why)
        await self._poll(min(POLL_FLEET_HOURS, left))

    async def _between_waves(self) -> bool:
        """Obey pause (handing the budget back meanwhile) and abort; True to stop here."""
        if self.paused and not self.abort:
            if self.in_arbiter:
                await self._release("paused")
            await self._phase("paused", "paused by operator")
            await workflow.wait_condition(lambda: not self.paused or bool(self.abort))
            if not self.abort:
                await self._phase("planning", "resumed")
        if not self.abort and (self.inp.spec.schedule or self.inp.spec.soak_hours):
            await self._await_window()
        return bool(self.abort)

    async def _await_window(self) -> None:
        """Outside the spec's windows (or in a blackout), or within its ``soak`` of the latest
        return (ops-soak), start no wave: hand the budget back and wait, in fleet time."""
        spec, clock = self.inp.spec, self.inp.clock
        while not self.abort:
            now, soak = fleet_hours_now(clock), Soak(spec.soak_hours)
            hold = wave_hold(spec.schedule, soak, clock.anchor_wall, now, self.p.last_return_hours)
            if hold is None or (hold.soak and not workflow.patched("ops-soak")):
                return
            if self.in_arbiter:
                await self._release(hold.release_reason)
            await self._phase("waiting", hold.text)
            await self._wait_fleet(hold.until, now)  # an abort cuts it short

    async def _acquire(self, want: int, limit: int) -> int:
        """Wait, visibly, until the arbiter lets this operation run alone; 0 if told to stop.

        Also 0 once the history is full: the wait goes on in the next run, still queued.
        """
        while not (self.paused or self.abort or self._history_full()):
            self.in_arbiter = True  # before asking: a cancelled ask may still have joined
            grant: Grant = await fleet_call(
                ArbiterActivities.acquire,
                AcquireRequest(
                    cluster=self.inp.cluster,
                    holder=self.inp.operation_id,
                    workflow_id=workflow.info().workflow_id,
                    kind="operation",
                    want=want,
                    holding=0,
                    limit=limit,
                    exclusive=True,
                ),
                summary=f"ask {self.inp.cluster}'s capacity arbiter to run alone ({want} hosts)",
            )
            self.p.waiting_for = grant.waiting_for
            if grant.granted:
                self.p.granted_hosts = grant.granted
                return grant.granted
            await self._phase("waiting", grant.reason)
            await self._poll(POLL_FLEET_HOURS)
        return 0
