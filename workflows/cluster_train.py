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
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from orchestrator.arbiter.types import AcquireRequest, Grant, ReleaseRequest
    from orchestrator.execution.cycle import cycle_complete, project_cycle_end
    from orchestrator.execution.halting import HaltRule
    from orchestrator.execution.messages import ClockInfo, FleetInfoRequest, HostsRequest
    from orchestrator.models import check_targets
    from orchestrator.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from orchestrator.train.client import ALREADY_STOPPED
    from orchestrator.train.spec import check_train_change
    from orchestrator.train.types import (
        ControlRequest,
        DomainInput,
        DomainProgress,
        DomainResult,
        PlanDomainRequest,
        PlanDomainResult,
        TrainChange,
        TrainInput,
        TrainStatus,
    )
    from orchestrator.train.ui import domain_summary, train_details
    from workflows.domain_maintenance import DomainMaintenance
    from workflows.fleet_clock import clock_party, fleet_options, wall_seconds
    from workflows.train_windows import TrainWindows, train_windows

#: How often (in fleet time) a waiting train looks again when nothing wakes it.
POLL_FLEET_HOURS = 1.0
#: ...but never more often than this in wall time: domains signal their progress anyway.
MIN_POLL_SECONDS = 1.0
#: On a logical clock the train takes its turn after its domains' at the same instant, as the
#: simulator plans after the domains' looks and settled batches.
TRAIN_CLOCK_RANK = 1
#: On a logical clock the train continues as new after this many turns (about 4,000 history
#: events on meta-24k, where the server suggests continuing as new), or at max_history_events.
LOGICAL_TURNS_PER_RUN = 120


@workflow.defn(name="ClusterTrain")
class ClusterTrain:
    def __init__(self) -> None:
        self.inp: TrainInput | None = None
        self.in_flight: dict[str, list[str]] = {}
        self.wake = False
        self.clock_turns: int | None = None  # turns taken on a logical clock in this run
        self.windows: TrainWindows | None = None  # with a schedule: its windows and blackouts
        self.hosts_total = 0  # the cluster's size (for the UI's budget line)
        self.speed: float | None = None  # fleet hours per wall hour, unless logical (for the UI)

    # ----------------------------------------------------------------- queries
    @workflow.query(name="status")
    def status(self) -> TrainStatus:
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        target = spec.cycle_target_hours
        end, on_track = project_cycle_end(st.counts, st.cycle_started_hours, target)
        total = st.counts.hosts_total
        return TrainStatus(
            cycle_target_hours=spec.cycle_target_hours,
            cycle_projected_end_hours=None if end is None else round(end, 3),
            cycle_on_track=on_track,
            max_unavailable_hosts=spec.budget.limit(total),
            maintenance_hosts=spec.budget.maintenance_limit(total),
            cluster=spec.cluster,
            state=st.phase,
            reason=st.reason,
            cycles_completed=st.cycles_completed,
            hosts_total=st.counts.hosts_total,
            hosts_visited_this_cycle=st.counts.visited,
            in_maintenance=st.counts.in_flight,
            quarantined=st.counts.quarantined,
            in_repair=st.counts.in_repair,
            domain_size=spec.domain_size,
            budget=spec.budget,
            targets=spec.targets,
            waiting=st.waiting,
            visits_total=st.visits_total,
            jobs_interrupted=st.jobs_interrupted,
            lost_gpu_hours=round(st.lost_gpu_hours, 3),
            fleet_hours=st.counts.fleet_hours,
            last_cycle_fleet_hours=st.last_cycle_fleet_hours,
            last_cycle_wall_seconds=st.last_cycle_wall_seconds,
            rollout=spec.rollout or next(iter(spec.rollouts), None),
            rollouts=spec.riding(),
            rollout_only=spec.rollout_only,
            negotiations={j: t for talks in st.negotiations.values() for j, t in talks.items()},
            window_state=st.window_state,
            next_window_start=st.next_window_start if st.window_state != "open" else None,
            window_closes_at=st.window_closes_at if st.window_state == "open" else None,
        )

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
        if progress.released and progress.domain_id in self.in_flight:
            # Handed back (its job refused): no longer the domain's, so a host the fleet later
            # cordons for us again (piggybacked) is handed to the next domain, not left waiting.
            gone = set(progress.released)
            held = self.in_flight[progress.domain_id]
            self.in_flight[progress.domain_id] = [h for h in held if h not in gone]
        self._count_outcomes(progress.outcomes)
        self.wake = True

    @workflow.update(name="pause")
    def pause(self, req: ControlRequest) -> TrainStatus:
        self._set_phase("paused", req.reason or "paused by operator")
        return self.status()

    @pause.validator
    def _can_pause(self, req: ControlRequest) -> None:
        self._require_phase(("running", "halted"), "pause")

    @workflow.update(name="resume")
    def resume(self, req: ControlRequest) -> TrainStatus:
        assert self.inp is not None
        self.inp.state.failures_in_a_row = 0
        self._set_phase("running", req.reason)
        return self.status()

    @resume.validator
    def _can_resume(self, req: ControlRequest) -> None:
        # Not "running": a resume of a running train would reset its failure count, unasked.
        self._require_phase(("paused", "halted"), "resume")

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
                "the train has already stopped", type=ALREADY_STOPPED, non_retryable=True
            )
        self._require_phase(("running", "paused", "halted", "stopping"), "stop")

    def _require_phase(self, allowed: tuple[str, ...], action: str) -> None:
        assert self.inp is not None
        if self.inp.state.phase not in allowed:
            raise ValueError(f"cannot {action} a train that is {self.inp.state.phase}")

    @workflow.update(name="reconfigure")
    def reconfigure(self, change: TrainChange) -> TrainStatus:
        """Live change of domain size, budget, targets (merged) or failure threshold."""
        assert self.inp is not None
        spec = self.inp.spec
        if change.domain_size is not None:
            spec.domain_size = change.domain_size
        if change.budget is not None:
            spec.budget = change.budget
        if change.targets is not None:
            spec.targets = {**spec.targets, **check_targets(change.targets, allow_upper=False)}
        if change.halt_after_failures is not None:
            spec.halt_after_failures = change.halt_after_failures
        if (change.clear_rollout or change.rollout is not None) and workflow.patched(
            "train-many-rollouts"
        ):
            self._change_rollouts(change)
        else:
            if change.clear_rollout:
                spec.rollout = None
            if change.rollout is not None:
                spec.rollout = change.rollout
        self.wake = True
        return self.status()

    def _change_rollouts(self, change: TrainChange) -> None:
        """Several campaigns ride at once, one rollout each: a ride adds or replaces that
        campaign's (keeping its place in the arrival order), a clear drops only the named
        campaign's (all when none is named). The older single ``rollout`` moves into the list."""
        assert self.inp is not None
        spec = self.inp.spec
        by_campaign = {r.campaign: r for r in spec.riding()}
        if change.clear_rollout:
            if change.rollout_campaign:
                by_campaign.pop(change.rollout_campaign, None)
            else:
                by_campaign.clear()
        if change.rollout is not None:
            by_campaign[change.rollout.campaign] = change.rollout
        spec.rollout, spec.rollouts = None, list(by_campaign.values())

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
        self.speed = None if clock.logical else clock.speed
        self._show()
        if clock.logical:
            # One logical clock per cluster: the train and its domains are parties of this one.
            clock = clock.model_copy(update={"cluster": spec.cluster})
            clock_party(clock, owner=spec.workflow_id, rank=TRAIN_CLOCK_RANK)
            self.clock_turns = 0
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
                    if self._cycle_done():
                        self._finish_cycle()
                        if spec.stop_after_cycles and st.cycles_completed >= spec.stop_after_cycles:
                            self._set_phase("stopping", f"completed {st.cycles_completed} cycle(s)")
                            continue
                if st.phase in ("halted", "paused"):
                    await self._withdraw_claim()
                else:
                    self.claim_withdrawn = False
                self.wake = False
                self._show()
                await self._idle(clock)
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

    async def _withdraw_claim(self) -> None:
        """Once paused or halted, take back the standing claim on freed hosts (piggybacking),
        so no host is cordoned for a train that will not visit it (train-withdraw-claim)."""
        assert self.inp is not None
        if getattr(self, "claim_withdrawn", False) or not workflow.patched("train-withdraw-claim"):
            return
        self.claim_withdrawn = True
        spec = self.inp.spec
        await workflow.execute_activity_method(
            FleetActivities.withdraw_claim,
            HostsRequest(
                cluster=spec.cluster,
                owner=spec.workflow_id,
                hosts=[h for hosts in self.in_flight.values() for h in hosts],
                wall=workflow.now(),
                targets=spec.targets,
            ),
            summary=f"withdraw {spec.workflow_id}'s claim on freed hosts of {spec.cluster}",
            **fleet_options(),
        )

    def _history_full(self) -> bool:
        assert self.inp is not None
        info = workflow.info()
        if self.clock_turns is not None:
            # On a logical clock a run ends after a fixed number of turns: the history's length
            # depends on how events happened to batch into workflow tasks, and a run that stops
            # planning to continue as new at another turn would change the run's outcome.
            return (
                self.clock_turns >= LOGICAL_TURNS_PER_RUN
                or info.get_current_history_length() > self.inp.max_history_events
            )
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.inp.max_history_events
        )

    async def _idle(self, clock: ClockInfo) -> None:
        """Wait for a domain's progress, a control message, or the next look the planner wants.

        Domains signal as hosts come back, so the poll only catches what nobody signals:
        repairs finishing, jobs ending on hosts the planner is waiting for.
        """
        assert self.inp is not None
        st = self.inp.state
        if st.phase == "stopping" and not self.in_flight and workflow.patched("train-stop-now"):
            # Stopped while it planned (the stop came during its plan): nothing holds it, so it
            # must not wait for domains to move the clock (there are none): it closes now.
            return
        now = st.counts.fleet_hours
        target = now + POLL_FLEET_HOURS
        if st.retry_at_hours is not None and now < st.retry_at_hours < target:
            target = st.retry_at_hours
        floor: float | None = None
        if self.windows is not None:  # a window edge may come first
            now, target, floor = self.windows.timer(now, target)
        if clock.logical:
            await self._idle_logical(clock, target)
            return
        if self.wake:
            return
        floor = MIN_POLL_SECONDS if floor is None else floor
        timeout = max(floor, wall_seconds(clock, target - now))
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self.wake, timeout=timedelta(seconds=timeout))

    async def _idle_logical(self, clock: ClockInfo, target: float) -> None:
        """On a logical clock, a party like the domains: wait for our turn at the poll (or the
        planner's retry) instant, when a domain's batch settled (the domain wakes us at that
        instant), or when a domain ends (it holds the clock until we saw it end). Signals do
        not wake us by themselves: when they arrive depends on thread scheduling, turns do not.
        A train that will not plan (paused, halted, stopping, or waiting for its domains to end
        before it continues as new) waits for nothing and lets its domains move the clock."""
        assert self.inp is not None
        st, spec = self.inp.state, self.inp.spec
        party = clock_party(clock)
        party.children(sorted(self.in_flight))
        phase, flying, settings = st.phase, set(self.in_flight), spec.model_dump()
        plans = phase == "running" and not self._history_full()

        def interrupted() -> bool:
            return (
                st.phase != phase or set(self.in_flight) != flying or spec.model_dump() != settings
            )

        await party.wait(target if plans else None, interrupted)
        assert self.clock_turns is not None
        self.clock_turns += 1

    async def _plan_more(self, clock: ClockInfo, tasks: set[asyncio.Task[None]]) -> None:
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        held = [h for hosts in self.in_flight.values() for h in hosts]
        grant: Grant = await workflow.execute_activity_method(
            ArbiterActivities.acquire,
            AcquireRequest(
                cluster=spec.cluster,
                holder=spec.workflow_id,
                workflow_id=workflow.info().workflow_id,
                kind="train",
                want=spec.domain_size,
                holding=st.counts.in_flight,
                limit=max(1, self._arbiter_budget(clock.hosts_total)),
            ),
            summary=f"ask {spec.cluster}'s capacity arbiter for up to {spec.domain_size} hosts",
            **fleet_options(),
        )
        if st.phase != "running":
            return  # paused, halted or stopped while we asked: take no new hosts
        res: PlanDomainResult = await workflow.execute_activity_method(
            FleetActivities.plan_domain,
            PlanDomainRequest(
                cluster=spec.cluster,
                owner=spec.workflow_id,
                wall=workflow.now(),
                cycle_started_hours=st.cycle_started_hours,
                max_held=min(spec.domain_size, grant.granted),
                budget=spec.budget,
                max_wait_hours=spec.drain.max_wait_hours,
                policy=spec.policy,
                targets=spec.targets,
                in_flight=held,
                cycle_target_hours=spec.cycle_target_hours,
                rollout=spec.rollout,
                rollouts=spec.rollouts,
                rollout_only=spec.rollout_only,
                claim_until_hours=self.windows.closes_hours() if self.windows else None,
            ),
            summary=(
                f"choose and cordon up to {min(spec.domain_size, grant.granted)} due hosts "
                f"of {spec.cluster} within the budget"
            ),
            **fleet_options(),
        )
        st.counts = res.counts
        st.waiting = "" if res.hosts else (grant.reason or res.waiting)
        st.retry_at_hours = res.retry_at_hours
        if not res.hosts:
            self._show()
            return
        st.domains_started += 1
        domain_id = f"{spec.workflow_id}-c{st.cycle}-d{st.domains_started}"
        self.in_flight[domain_id] = res.hosts
        self._show()
        task = asyncio.create_task(self._run_domain(clock, domain_id, res.hosts, res.targets))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def _arbiter_budget(self, hosts_total: int) -> int:
        """What the arbiter splits among the cluster's owners: the maintenance budget (planned
        work of every owner together); the floor is the fleet's own check at each cordon."""
        assert self.inp is not None
        budget = self.inp.spec.budget
        if workflow.patched("budget-maintenance"):
            return budget.maintenance_limit(hosts_total)
        return budget.limit(hosts_total)

    async def _run_domain(
        self,
        clock: ClockInfo,
        domain_id: str,
        hosts: list[str],
        targets: dict[str, str] | None = None,
    ) -> None:
        """Run one domain; ``targets`` when a campaign's rollout gives them, else the train's."""
        assert self.inp is not None
        spec = self.inp.spec
        try:
            result: DomainResult = await workflow.execute_child_workflow(
                DomainMaintenance.run,
                DomainInput(
                    cluster=spec.cluster,
                    owner=spec.workflow_id,
                    domain_id=domain_id,
                    hosts=hosts,
                    targets=dict(spec.targets if targets is None else targets),
                    max_wait_hours=spec.drain.max_wait_hours,
                    policy=spec.policy,
                    clock=clock,
                    negotiate=spec.drain.negotiate,
                    max_refusals=spec.drain.max_refusals,
                ),
                id=domain_id,
                task_queue=workflow.info().task_queue,
                execution_timeout=timedelta(days=30),
                static_summary=domain_summary(spec.cluster, hosts, spec.targets),
            )
            self._record(result)
        finally:
            # Nothing here may touch the workflow's APIs (set_current_details): it also runs
            # when the worker evicts the run from its cache, outside the workflow event loop.
            self.in_flight.pop(domain_id, None)
            self.inp.state.negotiations.pop(domain_id, None)
            self.wake = True

    def _record(self, result: DomainResult) -> None:
        """Totals from a finished domain (its failures were counted batch by batch)."""
        assert self.inp is not None
        st = self.inp.state
        st.visits_total += len(result.returned)
        st.quarantined_total += len(result.quarantined)
        st.jobs_interrupted += result.jobs_interrupted
        st.lost_gpu_hours += result.lost_gpu_hours

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

    def _finish_cycle(self) -> None:
        assert self.inp is not None
        st = self.inp.state
        st.cycles_completed += 1
        st.last_cycle_fleet_hours = st.counts.fleet_hours - st.cycle_started_hours
        assert st.cycle_started_wall is not None
        st.last_cycle_wall_seconds = (workflow.now() - st.cycle_started_wall).total_seconds()
        workflow.logger.info(
            "cycle %d complete: %d visited, %d quarantined, %d in repair",
            st.cycle,
            st.counts.visited,
            st.counts.quarantined,
            st.counts.in_repair,
        )
        st.cycle += 1
        st.cycle_started_hours = st.counts.fleet_hours + 1e-6
        st.cycle_started_wall = workflow.now()
        st.cycle_visits = st.cycle_failures = 0

    async def _close(self, clock: ClockInfo) -> None:
        """Hand back anything still held, leave the arbiter, record that this train ended."""
        assert self.inp is not None
        spec = self.inp.spec
        await workflow.execute_activity_method(
            ArbiterActivities.release,
            ReleaseRequest(
                cluster=spec.cluster, holder=spec.workflow_id, reason=self.inp.state.reason
            ),
            summary=f"leave the capacity arbiter of {spec.cluster}",
            **fleet_options(),
        )
        await workflow.execute_activity_method(
            FleetActivities.close_owner,
            HostsRequest(
                cluster=spec.cluster,
                owner=spec.workflow_id,
                hosts=[],
                wall=workflow.now(),
                targets=spec.targets,
            ),
            summary=f"hand back any host of {spec.cluster} still held by {spec.workflow_id}",
            **fleet_options(),
        )
