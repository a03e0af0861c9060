"""One cluster of a bulk operation (id ``<op id>-<cluster>``): waves cut over whole, or rolled back.

It plans the cluster (a refusal fails it, with the reason), records the targets in the fleet so
hosts out for repair take them before they return, pre-stages packages on hosts still in
service, then takes the cluster's capacity arbiter exclusively: trains hand over (the wait is
visible as ``waiting`` with ``waiting_for``) and the operation runs its waves alone. Each wave
is cut from the cluster as it is now and cordoned atomically (``ops_take_wave``), drained by the
train's policy, changed and verified as a whole. Failures within ``max_failures`` (counted over
the cluster) are quarantined; beyond it the whole wave goes back to each host's previous
versions and the operation stops. Pause and abort are obeyed between waves, abort also while a
wave drains (nothing has changed yet, so it is released untouched). Whatever happens, the
``finally`` hands back anything still held, restores the fleet's targets unless the operation
succeeded, and leaves the arbiter, so every host ends on its old or its new versions, in service
or quarantined; then it tells the operation it is done (``cluster_done``), which is how an
operation that has continued as new learns the outcome of a child it no longer holds a handle to.

Between two waves (it holds no cordoned host then), once the server suggests it or the history
passes ``max_history_events``, it continues as new, carrying its progress, the targets to
restore, its place in the arbiter (kept: the arbiter knows holders by name and workflow id, which
continue-as-new keeps), pause/abort and its back-off; the ``finally`` does not run for that. The
next run re-plans the rest of the cluster and goes on with the next wave. Runs recorded before
this existed replay unchanged: all of it is behind the ``ops-continue-as-new`` patch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from activities.ops_activities import OpsActivities
    from orchestrator.contracts.arbiter_types import ReleaseRequest
    from orchestrator.contracts.errors import OPERATION_REFUSED, WAVE_ROLLED_BACK
    from orchestrator.contracts.ops_types import (
        OPERATION_ABORTED,
        ClusterControl,
        ClusterOpInput,
        ClusterOpState,
        ClusterPlanView,
        ClusterProgress,
        TakenWave,
        TakeWaveRequest,
        TargetsRequest,
    )
    from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from workflows.history import history_full
    from workflows.ops_pacing import WavePacing
    from workflows.ops_wave import MAX_POLL_FLEET_HOURS, POLL_FLEET_HOURS


@workflow.defn(name="ClusterOperation")
class ClusterOperation(WavePacing):
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
        #: The grant ``waves_total`` was planned with (None: the spec's budget).
        self.planned_with: int | None = s.progress.granted_hosts
        self.continuing = False
        self._published: dict[str, Any] = {}
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
                view = await self._call(OpsActivities.plan_cluster, self._req())
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
        view: ClusterPlanView = await self._call(
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
            await self._call(
                OpsActivities.set_targets,
                TargetsRequest(
                    cluster=inp.cluster,
                    owner=inp.operation_id,
                    wall=workflow.now(),
                    targets=dict(inp.spec.targets),
                ),
            )
            await self._phase("prestaging")
            await self._call(
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
        await self._call(
            FleetActivities.close_owner,
            self._hosts([], visit=False, reason=self.p.state),
            summary=f"hand back any host of {i.cluster} still held ({self.p.state})",
        )
        if restore is not None and self.targets_set:
            await self._call(
                OpsActivities.set_targets,
                TargetsRequest(
                    cluster=i.cluster, owner=i.operation_id, wall=workflow.now(), targets=restore
                ),
            )
        if self.in_arbiter:
            await self._release(self.abort or self.p.reason or self.p.state)

    async def _release(self, reason: str) -> None:
        req = ReleaseRequest(cluster=self.inp.cluster, holder=self.inp.operation_id, reason=reason)
        await self._call(
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
            self.p.fleet_hours = view.fleet_hours
            # hosts it lost mid-wave stay deferred
            self.p.deferred_hosts = sorted({*view.deferred_hosts, *self.p.lost_to_repair})
            self.p.hosts_deferred = len(self.p.deferred_hosts) - view.returning
            total = (
                self.p.waves_done
                + view.waves_left
                + (1 if view.returning and not view.waves_left else 0)
            )
            self._replan(total)
            if not view.refused and not view.work_left:
                return ""
            if await self._between_waves():
                return ""
            if self._history_full():
                self.continuing = True
                return ""
            if view.waiting_for_room:
                await self._wait_for_room(view)
                view = await self._call(
                    OpsActivities.plan_cluster,
                    self._req(),
                    summary=f"look for room in {self.inp.cluster}",
                )
                continue
            self.p.room_wait_since = None
            # It asks for its whole budget: the grant is then the arbiter's share, stable
            # wave after wave, and the rest is planned in waves of that size.
            grant = await self._acquire(view.limit, view.limit)
            if grant:
                wave: TakenWave = await self._call(
                    OpsActivities.take_wave,
                    TakeWaveRequest(
                        spec=self.inp.spec,
                        cluster=self.inp.cluster,
                        owner=self.inp.operation_id,
                        wall=workflow.now(),
                        max_hold=grant,
                        since_hours=self.p.started_hours,
                    ),
                    summary=f"cut wave {self.p.waves_done + 1} (up to {grant} hosts) and cordon it",
                )
                if wave.hosts:
                    self.idle = 0
                    failure = await self._run_wave(wave)
                    if failure:
                        return failure
                else:
                    self.idle += 1
                    self.p.waiting_for = wave.waiting_for
                    await self._phase("waiting", wave.waiting or view.refused or "")
                    self.p.fleet_hours = wave.fleet_hours
                    backoff = min(MAX_POLL_FLEET_HOURS, POLL_FLEET_HOURS * 2**self.idle)
                    await self._poll(POLL_FLEET_HOURS if wave.waiting_for else backoff)
            view = await self._call(
                OpsActivities.plan_cluster,
                self._req(),
                summary=f"plan what is left of {self.inp.cluster}",
            )
