"""The maintenance train of one cluster: a long-running entity workflow (id ``train-<cluster>``).

It keeps up to ``domain_size`` hosts in maintenance: whenever room frees up it asks the shared
planner (through the ``plan_domain`` activity, which also cordons, atomically with the budget
check) for the next hosts, and runs them as a ``DomainMaintenance`` child. It counts the visit
cycle (every host visited, quarantined or in repair), obeys pause/resume/stop and live changes,
halts itself when failures pile up, and continues as new before its history grows large, after
its in-flight domains finish and its handlers return.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.errors import TRAIN_ALREADY_STOPPED
    from orchestrator.contracts.messages import ClockInfo, FleetInfoRequest
    from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from orchestrator.contracts.train_spec import check_train_change
    from orchestrator.contracts.train_types import (
        ControlRequest,
        DomainProgress,
        DomainResult,
        TrainChange,
        TrainInput,
        TrainStatus,
    )
    from orchestrator.execution.cycle import cycle_complete
    from orchestrator.execution.halting import HaltRule
    from orchestrator.train.bookkeeping import (
        held_hosts,
        note_plan,
        record_domain,
        record_hand_back,
        release_hosts,
        rest,
    )
    from orchestrator.train.controls import (
        apply_settings,
        change_rollouts,
        change_single_rollout,
        note_rollout_failures,
        require_phase,
    )
    from orchestrator.train.status import train_status
    from orchestrator.train.ui import domain_summary, train_details
    from workflows.domain_maintenance import DomainMaintenance
    from workflows.fleet_timing import fleet_options
    from workflows.train_planning import TrainPlanning
    from workflows.train_waiting import TrainWaiting
    from workflows.train_windows import TrainWindows, train_windows


@workflow.defn(name="ClusterTrain")
class ClusterTrain(TrainPlanning, TrainWaiting):
    def __init__(self) -> None:
        self.inp: TrainInput | None = None
        self.in_flight: dict[str, list[str]] = {}
        self.wake = False
        self.capped = False  # the last plan took nothing since the train holds all it may
        self.windows: TrainWindows | None = None  # with a schedule: its windows and blackouts
        self.hosts_total = 0  # the cluster's size (for the UI's budget line)
        self.speed: float | None = None  # fleet hours per wall hour (for the UI)
        #: domains running a campaign's rollout -> the targets they install
        self.rollout_domains: dict[str, dict[str, str]] = {}

    # ----------------------------------------------------------------- queries
    @workflow.query(name="status")
    def status(self) -> TrainStatus:
        assert self.inp is not None
        return train_status(self.inp.spec, self.inp.state, held=len(held_hosts(self.in_flight)))

    # ----------------------------------------------------------------- control
    def _set_phase(self, phase: str, reason: str = "") -> None:
        assert self.inp is not None
        self.inp.state.phase, self.inp.state.reason = phase, reason
        workflow.upsert_search_attributes([TRAIN_PHASE.value_set(phase)])
        self.wake = True
        self._show()

    def _show(self) -> None:
        """The train page's current details in the UI (not a command: replay ignores it)."""
        assert self.inp is not None
        workflow.set_current_details(
            train_details(
                self.inp.spec,
                self.inp.state,
                self.in_flight,
                self.inp.spec.budget.limit(self.inp.state.counts.hosts_total or self.hosts_total),
                self.speed,
            )
        )

    @workflow.signal(name="domain_progress")
    def domain_progress(self, progress: DomainProgress) -> None:
        """A domain finished a batch: count its failures now, and there may be room for more.
        A negotiation-only message (its jobs' answers) is kept for status and wakes nobody."""
        if progress.negotiations is not None:
            assert self.inp is not None
            self.inp.state.negotiations[progress.domain_id] = progress.negotiations
            return
        release_hosts(self.in_flight, progress.domain_id, progress.released)
        if progress.visited and self.inp is not None:  # a domain ending without a result
            record_hand_back(self.inp.state, progress)
        if progress.domain_id in self.rollout_domains:
            # A campaign's rollout: its gate judges these hosts (a canary failing is the
            # campaign's evidence), not the train's failures-in-a-row rule, which keeps judging
            # the train's own targets and these hosts again once the campaign leaves.
            self.wake = True
            return
        self._count_outcomes(progress.outcomes)
        self.wake = True

    @workflow.update(name="pause")
    def pause(self, req: ControlRequest) -> TrainStatus:
        self._set_phase("paused", req.reason or "paused by operator")
        return self.status()

    @pause.validator
    def _can_pause(self, req: ControlRequest) -> None:
        assert self.inp is not None
        require_phase(self.inp.state.phase, "pause")

    @workflow.update(name="resume")
    def resume(self, req: ControlRequest) -> TrainStatus:
        assert self.inp is not None
        self.inp.state.failures_in_a_row = 0
        self._set_phase("running", req.reason)
        return self.status()

    @resume.validator
    def _can_resume(self, req: ControlRequest) -> None:
        assert self.inp is not None
        require_phase(self.inp.state.phase, "resume")

    @workflow.update(name="stop")
    def stop(self, req: ControlRequest) -> TrainStatus:
        self._set_phase("stopping", req.reason or "stopped by operator")
        return self.status()

    @stop.validator
    def _can_stop(self, req: ControlRequest) -> None:
        # A second stop is no error: while stopping it is accepted again, and once stopped the
        # refusal carries a type by which the client answers with the final status (exit 0).
        assert self.inp is not None
        if self.inp.state.phase == "stopped":
            raise ApplicationError(
                "the train has already stopped", type=TRAIN_ALREADY_STOPPED, non_retryable=True
            )
        require_phase(self.inp.state.phase, "stop")

    @workflow.update(name="reconfigure")
    def reconfigure(self, change: TrainChange) -> TrainStatus:
        """Live change of domain size, budget, targets (merged) or failure threshold."""
        assert self.inp is not None
        apply_settings(self.inp.spec, change)
        if change.clear_rollout or change.rollout is not None:
            change_rollouts(self.inp.spec, change)
        else:
            change_single_rollout(self.inp.spec, change)
        self.wake = True
        return self.status()

    @reconfigure.validator
    def _check_change(self, change: TrainChange) -> None:
        assert self.inp is not None
        check_train_change(change, self.inp.state.counts.hosts_total, self.inp.state.phase)

    # --------------------------------------------------------------------- run
    @workflow.run
    async def run(self, inp: TrainInput) -> TrainStatus:
        self.inp = inp
        spec, st = inp.spec, inp.state
        workflow.upsert_search_attributes(
            [
                TRAIN_CLUSTER.value_set(spec.cluster),
                TRAIN_CAMPAIGN.value_set(spec.campaign or spec.workflow_id),
                TRAIN_PHASE.value_set(st.phase),
            ]
        )
        clock: ClockInfo
        if inp.clock is not None:
            clock = inp.clock
        else:
            clock = await workflow.execute_activity_method(
                FleetActivities.fleet_info,
                FleetInfoRequest(cluster=spec.cluster),
                summary=f"read the fleet clock and size of {spec.cluster}",
                **fleet_options(),
            )
        self.hosts_total = clock.hosts_total
        self.speed = clock.speed
        self._show()
        if st.cycle_started_wall is None:
            st.cycle_started_wall = workflow.now()
        self.windows = train_windows(spec.schedule, clock, st)
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                if st.phase == "stopping" or self._history_full():
                    if not self.in_flight:
                        break
                elif st.phase == "running" and self.windows and not self.windows.allows():
                    self.windows.closed(tasks)  # no new hosts; with hard_stop, hand back
                    self._show()
                elif st.phase == "running":
                    await self._plan_more(clock, tasks)
                    if not st.resting and self._cycle_done():
                        self._finish_cycle()
                        if spec.stop_after_cycles and st.cycles_completed >= spec.stop_after_cycles:
                            self._set_phase("stopping", f"completed {st.cycles_completed} cycle(s)")
                            continue
                if st.phase in ("halted", "paused") or st.resting:
                    await self._withdraw_claim()
                else:
                    self.claim_withdrawn = False
                self.wake = False
                self._show()
                await self._idle(clock)
                self.capped = False
        except (asyncio.CancelledError, CancelledError):
            for t in tasks:
                t.cancel()
            await self._close(clock)
            raise
        if st.phase == "stopping":
            await self._close(clock)
            self._set_phase("stopped", st.reason)
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self.status()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            TrainInput(spec=spec, state=st, clock=clock, max_history_events=inp.max_history_events)
        )

    async def _plan_more(self, clock: ClockInfo, tasks: set[asyncio.Task[None]]) -> None:
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        if st.resting:
            await self._look_while_resting()
            return
        asked = await self._ask_and_plan(clock)
        if asked is None:
            return  # paused, halted or stopped while we asked: take no new hosts
        grant, res = asked
        note_plan(st, res, workflow.now())
        st.counts = res.counts
        st.waiting = "" if res.hosts else (grant.reason or res.waiting)
        st.retry_at_hours = res.retry_at_hours
        # Holding all it may (its domains' hosts), nothing to retry: only a domain's progress
        # can let it take more, and that wakes it (``_idle`` polls only to keep its claim).
        full = res.counts.in_flight >= min(spec.domain_size, grant.granted)
        self.capped = not res.hosts and bool(self.in_flight) and res.retry_at_hours is None and full
        if not res.hosts:
            self._show()
            return
        st.domains_started += 1
        domain_id = f"{spec.workflow_id}-c{st.cycle}-d{st.domains_started}"
        self.in_flight[domain_id] = res.hosts
        self._show()
        run = self._run_domain(clock, domain_id, res.hosts, res.targets, res.counts.fleet_hours)
        task = asyncio.create_task(run)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _run_domain(
        self,
        clock: ClockInfo,
        domain_id: str,
        hosts: list[str],
        targets: dict[str, str] | None = None,
        start_hours: float = 0.0,
    ) -> None:
        """Run one domain; ``targets`` when a campaign's rollout gives them, else the train's."""
        assert self.inp is not None
        spec = self.inp.spec
        if targets is not None:
            self.rollout_domains[domain_id] = dict(targets)
        try:
            inp = self._domain_input(clock, domain_id, hosts, targets, start_hours)
            result: DomainResult = await workflow.execute_child_workflow(
                DomainMaintenance.run,
                inp,
                id=domain_id,
                task_queue=workflow.info().task_queue,
                execution_timeout=timedelta(days=30),
                # The domain's own targets (a rollout's, else the train's): the
                # details it writes name them, and the summary must agree.
                static_summary=domain_summary(inp.cluster, inp.hosts, inp.targets),
            )
            record_domain(self.inp.state, result)
            if result.untold and domain_id not in self.rollout_domains:
                # its last batch, told here: as ``domain_progress`` counts
                self._count_outcomes(result.untold)
            if targets is not None:
                note_rollout_failures(spec, [*result.quarantined, *result.lost_to_repair], targets)
        finally:
            # Nothing here may touch the workflow's APIs (set_current_details): it also runs
            # when the worker evicts the run from its cache, outside the workflow event loop.
            self.in_flight.pop(domain_id, None)
            self.rollout_domains.pop(domain_id, None)
            self.inp.state.negotiations.pop(domain_id, None)
            self.wake = True

    def _count_outcomes(self, outcomes: list[bool]) -> None:
        """Fold hosts' pass/fail, in completion order, into the halting rule."""
        assert self.inp is not None
        spec = self.inp.spec
        rule = HaltRule(spec.halt_after_failures, spec.halt_failure_rate)
        why = rule.fold(self.inp.state, outcomes)
        if why is not None:
            self._halt(why)

    def _halt(self, reason: str) -> None:
        assert self.inp is not None
        if self.inp.state.phase == "running":
            workflow.logger.warning("train halted: %s", reason)
            self._set_phase("halted", reason)

    def _cycle_done(self) -> bool:
        assert self.inp is not None
        return cycle_complete(self.inp.state.counts, len(self.in_flight))

    async def _look_while_resting(self) -> None:
        """A resting train's look: no capacity asked, nothing taken; it starts the next cycle
        when a host needs a visit, and then plans at once."""
        assert self.inp is not None
        st = self.inp.state
        res = await self._plan_at_rest()
        note_plan(st, res, workflow.now())
        st.counts, st.waiting, st.retry_at_hours = res.counts, res.waiting, None
        if not st.resting:
            workflow.logger.info("cycle %d starts: a host needs a visit", st.cycle)
            self.claim_withdrawn = False
            self.wake = True

    def _finish_cycle(self) -> None:
        assert self.inp is not None
        st = self.inp.state
        workflow.logger.info(
            "cycle %d complete: %d visited, %d quarantined, %d in repair",
            st.cycle,
            st.counts.visited,
            st.counts.quarantined,
            st.counts.in_repair,
        )
        rest(st, workflow.now())
