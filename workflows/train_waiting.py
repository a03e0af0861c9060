"""The waiting half of a cluster's train: its idle timers, its history limit, and
how it lets go (the piggyback claim when it stops planning, every host and the arbiter when it
ends).

A part of the ``ClusterTrain`` workflow (a mixin over its state), kept apart for size: the
workflow module keeps its handlers, its loop and how it plans and runs domains.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.arbiter_types import ReleaseRequest
    from orchestrator.contracts.messages import ClockInfo, HostsRequest
    from orchestrator.contracts.train_types import DomainInput, TrainInput
    from orchestrator.execution.cycle import next_look_hours
    from orchestrator.execution.take import PIGGYBACK_CLAIM_HOURS
    from orchestrator.train.bookkeeping import held_hosts
    from workflows.fleet_timing import (
        capped_poll_seconds,
        fleet_call,
        fleet_options,
        wall_seconds,
    )
    from workflows.history import history_full
    from workflows.train_windows import TrainWindows

#: A waiting train looks again at ``next_look_hours`` (its poll or the planner's retry), but
#: never more often than this in wall time: domains signal their progress anyway.
MIN_POLL_SECONDS = 1.0
#: A train holding all it may polls only to keep its standing claim: just before
#: the claim would lapse, instead of every POLL_FLEET_HOURS. Such a plan changes nothing else:
#: the planner has no slot to fill, and the domains' progress wakes the train as hosts return.
CAPPED_POLL_FLEET_HOURS = 0.95 * PIGGYBACK_CLAIM_HOURS


class TrainWaiting:
    """The train's waits and its letting go; the workflow class provides the state."""

    inp: TrainInput | None
    in_flight: dict[str, list[str]]
    wake: bool
    capped: bool
    windows: TrainWindows | None
    claim_withdrawn: bool

    async def _withdraw_claim(self) -> None:
        """Once paused or halted, take back the standing claim on freed hosts (piggybacking),
        so no host is cordoned for a train that will not visit it (train-withdraw-claim)."""
        assert self.inp is not None
        if getattr(self, "claim_withdrawn", False):
            return
        self.claim_withdrawn = True
        spec = self.inp.spec
        await fleet_call(
            FleetActivities.withdraw_claim,
            HostsRequest(
                cluster=spec.cluster,
                owner=spec.workflow_id,
                hosts=held_hosts(self.in_flight),
                wall=workflow.now(),
                targets=spec.targets,
            ),
            summary=f"withdraw {spec.workflow_id}'s claim on freed hosts of {spec.cluster}",
        )

    def _domain_input(
        self,
        clock: ClockInfo,
        domain_id: str,
        hosts: list[str],
        targets: dict[str, str] | None,
        start_hours: float,
    ) -> DomainInput:
        """A domain's input (``targets``: a rollout's, else the train's), planned at fleet hour
        ``start_hours``."""
        assert self.inp is not None
        spec = self.inp.spec
        return DomainInput(
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
            start_hours=start_hours,
        )

    def _history_full(self) -> bool:
        assert self.inp is not None
        return history_full(self.inp.max_history_events)

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
        now = st.counts.fleet_hours
        target = next_look_hours(now, st.retry_at_hours)
        if self.capped:
            target = now + CAPPED_POLL_FLEET_HOURS
        floor: float | None = None
        if self.windows is not None:  # a window edge may come first
            now, target, floor = self.windows.timer(now, target)
        if self.wake:
            return
        floor = MIN_POLL_SECONDS if floor is None else floor
        timeout = capped_poll_seconds(clock, max(floor, wall_seconds(clock, target - now)))
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self.wake, timeout=timedelta(seconds=timeout))

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
            HostsRequest(
                cluster=spec.cluster,
                owner=spec.workflow_id,
                hosts=[],
                wall=workflow.now(),
                targets=spec.targets,
            ),
            summary=f"hand back any host of {spec.cluster} still held by {spec.workflow_id}",
        )
