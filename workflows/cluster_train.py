"""The maintenance train of one cluster: a long-running entity workflow (id ``train-<cluster>``).

It keeps up to ``domain_size`` hosts in maintenance: whenever room frees up it asks the capacity
arbiter and the shared planner (in one activity, ``plan_granted_domain``, which also cordons,
atomically with the budget check) for the next hosts, and runs them as a ``DomainMaintenance``
child. It counts the visit cycle (every host visited, quarantined or in repair), obeys
pause/resume/stop and live changes, halts itself when failures pile up, keeps to its maintenance
windows, and continues as new before its history grows large, after its in-flight domains finish
and its handlers return. Its decisions are pure code it interprets: the requests it sends
(``orchestrator.train.requests``), its bookkeeping (``orchestrator.train.bookkeeping``), and
when it looks again (``orchestrator.execution.train_waits``).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.arbiter_types import Grant, ReleaseRequest
    from orchestrator.contracts.errors import TRAIN_ALREADY_STOPPED
    from orchestrator.contracts.messages import ClockInfo, FleetInfoRequest
    from orchestrator.contracts.search_attributes import TRAIN_CAMPAIGN, TRAIN_CLUSTER, TRAIN_PHASE
    from orchestrator.contracts.train_spec import check_train_change
    from orchestrator.contracts.train_types import (
        ControlRequest,
        DomainProgress,
        DomainResult,
        PlanDomainRequest,
        PlanDomainResult,
        PlanGrantedRequest,
        TrainChange,
        TrainInput,
        TrainStatus,
    )
    from orchestrator.contracts.ui_text import plural
    from orchestrator.execution.batches import domain_size_now
    from orchestrator.execution.cycle import cycle_complete
    from orchestrator.execution.halting import HaltRule
    from orchestrator.execution.soak import SOAK_WAIT, Soak, soak_text, soak_timer
    from orchestrator.execution.train_waits import TrainWindows, idle_timer, train_windows
    from orchestrator.train.bookkeeping import (
        fold_batch,
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
    from orchestrator.train.requests import (
        acquire_request,
        domain_input,
        hosts_request,
        plan_request,
    )
    from orchestrator.train.status import train_status
    from orchestrator.train.ui import domain_summary, train_details
    from workflows.domain_maintenance import DomainMaintenance
    from workflows.fleet_timing import (
        capped_poll_seconds,
        fleet_call,
        fleet_hours_now,
        fleet_options,
        history_full,
        wall_seconds,
    )

#: What one turn of the train's loop leaves to do: wait for the next look, go round again at
#: once, or end the run (stop, or continue as new).
Turn = Literal["wait", "again", "end"]


@workflow.defn(name="ClusterTrain")
class ClusterTrain:
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
        #: the standing claim on freed hosts was taken back (paused, halted or resting)
        self.claim_withdrawn = False
        #: domains cancelled as a window closed with ``hard_stop`` (each cancelled once)
        self.cancelled_at_close: set[asyncio.Task[None]] = set()
        self.clock: ClockInfo | None = None  # the fleet's clock, once read
        #: with a ``soak``: the fleet hour the soak after the latest return ends, while it holds
        self.soak_until: float | None = None

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
        if any(progress.outcomes) or progress.visited:
            self._note_return()
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
        clock = await self._start(inp)
        tasks: set[asyncio.Task[None]] = set()
        try:
            while (turn := await self._turn(clock, tasks)) != "end":
                if turn == "wait":
                    await self._wait_turn(clock)
        except (asyncio.CancelledError, CancelledError):
            for t in tasks:
                t.cancel()
            await self._close(clock)
            raise
        if inp.state.phase == "stopping":
            await self._close(clock)
            self._set_phase("stopped", inp.state.reason)
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self.status()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            TrainInput(
                spec=inp.spec,
                state=inp.state,
                clock=clock,
                max_history_events=inp.max_history_events,
            )
        )

    async def _start(self, inp: TrainInput) -> ClockInfo:
        """Tag the run for search, read the fleet's clock (once per chain of runs: it is
        carried over ``continue_as_new``) and the train's windows."""
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
        self.windows = train_windows(spec.schedule, clock.anchor_wall, st)
        self.clock = clock
        return clock

    async def _turn(self, clock: ClockInfo, tasks: set[asyncio.Task[None]]) -> Turn:
        """One turn of the loop: end once stopping (or the history is full) and nothing is
        held; outside a window take nothing; else plan more and count the cycle."""
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        if st.phase == "stopping" or history_full(self.inp.max_history_events):
            if not self.in_flight:
                return "end"
        elif st.phase == "running" and self.windows and not self._inside_window(clock):
            self._window_closed(clock, tasks)  # no new hosts; with hard_stop, hand back
            self._show()
        elif st.phase == "running" and self._soaking(clock):
            await self._withdraw_claim()  # piggyback takes are not exempt from the soak
            self._show()
        elif st.phase == "running":
            await self._plan_more(clock, tasks)
            if not st.resting and self._cycle_done():
                self._finish_cycle()
                if spec.stop_after_cycles and st.cycles_completed >= spec.stop_after_cycles:
                    self._set_phase("stopping", f"completed {st.cycles_completed} cycle(s)")
                    return "again"
        return "wait"

    async def _wait_turn(self, clock: ClockInfo) -> None:
        """Between turns: a train that does not plan lets its standing claim go; then it
        waits for a domain, a control message or its next look."""
        assert self.inp is not None
        st = self.inp.state
        if st.phase in ("halted", "paused") or st.resting:
            await self._withdraw_claim()
        elif self.soak_until is None:
            self.claim_withdrawn = False
        self.wake = False
        self._show()
        await self._idle(clock)
        self.capped = False

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
        full = res.counts.in_flight >= min(self._domain_size(), grant.granted)
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
            inp = domain_input(spec, clock, domain_id, hosts, targets, start_hours)
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
            if (why := fold_batch(spec, self.inp.state, result)) and workflow.patched(
                "train-batch"
            ):
                self._halt(why)
            if result.returned:
                self._note_return()
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

    # ------------------------------------------------------------- asking for hosts
    def _domain_size(self) -> int:
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        return domain_size_now(spec.domain_size, spec.batch, st.batch_size)

    def _plan_request(self, max_held: int) -> PlanDomainRequest:
        assert self.inp is not None
        claim_until = self.windows.closes_hours() if self.windows else None
        return plan_request(
            self.inp.spec,
            self.inp.state,
            workflow.now(),
            max_held,
            held_hosts(self.in_flight),
            claim_until,
        )

    async def _plan_at_rest(self) -> PlanDomainResult:
        """The resting train's look (``take_domain`` with ``resting``): it takes nothing."""
        assert self.inp is not None
        spec = self.inp.spec
        res: PlanDomainResult = await fleet_call(
            FleetActivities.plan_domain,
            self._plan_request(0),
            summary=f"resting: check whether a host of {spec.cluster} needs a visit",
        )
        return res

    async def _ask_and_plan(self, clock: ClockInfo) -> tuple[Grant, PlanDomainResult] | None:
        """The arbiter's grant and the planner's hosts within it; None if the train stopped
        running (paused, halted, stopping) while it asked: it takes no new hosts."""
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        ask = acquire_request(spec, st, workflow.info().workflow_id, clock.hosts_total)
        res: PlanDomainResult = await fleet_call(
            FleetActivities.plan_granted_domain,
            PlanGrantedRequest(acquire=ask, plan=self._plan_request(self._domain_size())),
            summary=f"ask {spec.cluster}'s capacity arbiter for up to {self._domain_size()} "
            "hosts, then choose and cordon that many due hosts within the budget",
        )
        assert res.grant is not None
        if st.phase != "running":
            if res.hosts:  # cordoned as the train stopped: back, untouched
                await self._hand_back_planned(res.hosts)
            return None
        return res.grant, res

    async def _hand_back_planned(self, hosts: list[str]) -> None:
        assert self.inp is not None
        await fleet_call(
            FleetActivities.release_hosts,
            hosts_request(self.inp.spec, hosts, workflow.now()),
            summary=f"hand back {plural(len(hosts), 'host')} planned as the train stopped",
        )

    # ---------------------------------------------------------- windows, soak and waits
    def _note_return(self) -> None:
        """Hosts this train maintained came back to service now: a ``soak`` starts over."""
        if self.inp is not None and self.clock is not None and self.inp.spec.soak_hours:
            self.inp.state.last_return_hours = fleet_hours_now(self.clock)

    def _soaking(self, clock: ClockInfo) -> bool:
        """Whether the train's ``soak`` after its latest return holds new domains back now
        (train-soak); says so in ``waiting`` while it does."""
        assert self.inp is not None
        st = self.inp.state
        soak = Soak(self.inp.spec.soak_hours)
        until = soak.until(st.last_return_hours)
        if until is None or not soak.holds(fleet_hours_now(clock), st.last_return_hours):
            self.soak_until = None
            if st.waiting.startswith(SOAK_WAIT):
                st.waiting = ""
            return False
        if not workflow.patched("train-soak"):
            return False
        self.soak_until = until
        st.waiting = soak_text(until)
        return True

    def _inside_window(self, clock: ClockInfo) -> bool:
        assert self.windows is not None
        return self.windows.allows(fleet_hours_now(clock))

    def _window_closed(self, clock: ClockInfo, domains: set[asyncio.Task[None]]) -> None:
        """Outside the windows: say so, and with ``hard_stop`` cancel the domains, whose
        cancellation hands their hosts back (``DomainMaintenance``'s hand-back)."""
        assert self.windows is not None
        self.windows.look(fleet_hours_now(clock))  # says why it waits
        if self.windows.schedule.hard_stop:
            for task in list(domains):
                if task not in self.cancelled_at_close:
                    self.cancelled_at_close.add(task)
                    task.cancel()  # the domain hands its hosts back, then ends
                    task.add_done_callback(_retrieve)
            self.cancelled_at_close &= domains

    async def _idle(self, clock: ClockInfo) -> None:
        """Wait for a domain's progress, a control message, or the next look the planner wants.

        Domains signal as hosts come back, so the poll only catches what nobody signals:
        repairs finishing, jobs ending on hosts the planner is waiting for.
        """
        assert self.inp is not None
        st = self.inp.state
        if st.phase == "stopping" and not self.in_flight:
            # Stopped while it planned (the stop came during its plan): nothing holds it, so it
            # must not wait for domains to move the clock (there are none): it closes now.
            return
        timer = idle_timer(st.counts.fleet_hours, st.retry_at_hours, self.capped)
        if self.windows is not None:  # a window edge may come first
            timer = self.windows.timer(fleet_hours_now(clock), timer)
        if self.soak_until is not None:  # or the soak's end
            timer = soak_timer(fleet_hours_now(clock), self.soak_until, timer)
        if self.wake:
            return
        seconds = max(timer.floor_seconds(), wall_seconds(clock, timer.target - timer.now))
        timeout = capped_poll_seconds(clock, seconds)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self.wake, timeout=timedelta(seconds=timeout))

    # -------------------------------------------------------------- letting go
    async def _withdraw_claim(self) -> None:
        """Once paused or halted, take back the standing claim on freed hosts (piggybacking),
        so no host is cordoned for a train that will not visit it (train-withdraw-claim)."""
        assert self.inp is not None
        if self.claim_withdrawn:
            return
        self.claim_withdrawn = True
        spec = self.inp.spec
        await fleet_call(
            FleetActivities.withdraw_claim,
            hosts_request(spec, held_hosts(self.in_flight), workflow.now()),
            summary=f"withdraw {spec.workflow_id}'s claim on freed hosts of {spec.cluster}",
        )

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
        await fleet_call(
            FleetActivities.close_owner,
            hosts_request(spec, [], workflow.now()),
            summary=f"hand back any host of {spec.cluster} still held by {spec.workflow_id}",
        )


def _retrieve(task: asyncio.Task[None]) -> None:
    """A domain cancelled at a window's close ends in a ChildWorkflowError nobody awaits: it
    is the expected outcome, so take it (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()
