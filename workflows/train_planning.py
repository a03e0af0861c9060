"""How a cluster's train asks for hosts: the arbiter's grant, then the planner's cordon, both
in one activity (``plan_granted_domain``).

A part of the ``ClusterTrain`` workflow (a mixin over its state), kept apart for size.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.arbiter_types import AcquireRequest, Grant
    from orchestrator.contracts.messages import ClockInfo, HostsRequest
    from orchestrator.contracts.train_types import (
        PlanDomainRequest,
        PlanDomainResult,
        PlanGrantedRequest,
        TrainInput,
    )
    from orchestrator.contracts.ui_text import plural
    from orchestrator.train.bookkeeping import held_hosts
    from workflows.fleet_timing import fleet_call
    from workflows.train_windows import TrainWindows


class TrainPlanning:
    """The train's ask for hosts; the workflow class provides the state."""

    inp: TrainInput | None
    in_flight: dict[str, list[str]]
    windows: TrainWindows | None

    def _arbiter_budget(self, hosts_total: int) -> int:
        """What the arbiter splits among the cluster's owners: the maintenance budget (planned
        work of every owner together); the floor is the fleet's own check at each cordon."""
        assert self.inp is not None
        return self.inp.spec.budget.maintenance_limit(hosts_total)

    def _plan_request(self, max_held: int) -> PlanDomainRequest:
        assert self.inp is not None
        spec, st = self.inp.spec, self.inp.state
        return PlanDomainRequest(
            cluster=spec.cluster,
            owner=spec.workflow_id,
            wall=workflow.now(),
            cycle_started_hours=st.cycle_started_hours,
            max_held=max_held,
            budget=spec.budget,
            max_wait_hours=spec.drain.max_wait_hours,
            policy=spec.policy,
            targets=spec.targets,
            in_flight=held_hosts(self.in_flight),
            cycle_target_hours=spec.cycle_target_hours,
            rollout=spec.rollout,
            rollouts=spec.rollouts,
            rollout_only=spec.rollout_only,
            claim_until_hours=self.windows.closes_hours() if self.windows else None,
            visit_rule=True,
            resting=st.resting,
            verify_every_hours=spec.verify_every_hours,
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
        ask = AcquireRequest(
            cluster=spec.cluster,
            holder=spec.workflow_id,
            workflow_id=workflow.info().workflow_id,
            kind="train",
            want=spec.domain_size,
            holding=st.counts.in_flight,
            limit=max(1, self._arbiter_budget(clock.hosts_total)),
        )
        res: PlanDomainResult = await fleet_call(
            FleetActivities.plan_granted_domain,
            PlanGrantedRequest(acquire=ask, plan=self._plan_request(spec.domain_size)),
            summary=f"ask {spec.cluster}'s capacity arbiter for up to {spec.domain_size} "
            "hosts, then choose and cordon that many due hosts within the budget",
        )
        assert res.grant is not None
        return await self._planned(res.grant, res)

    async def _planned(
        self, grant: Grant, res: PlanDomainResult
    ) -> tuple[Grant, PlanDomainResult] | None:
        """The plan, unless the train stopped running meanwhile (its hosts go back)."""
        assert self.inp is not None
        if self.inp.state.phase != "running":
            if res.hosts:  # cordoned as the train stopped: back, untouched
                await self._hand_back_planned(res.hosts)
            return None
        return grant, res

    async def _hand_back_planned(self, hosts: list[str]) -> None:
        assert self.inp is not None
        spec = self.inp.spec
        await fleet_call(
            FleetActivities.release_hosts,
            HostsRequest(
                cluster=spec.cluster,
                owner=spec.workflow_id,
                hosts=hosts,
                wall=workflow.now(),
                targets=spec.targets,
            ),
            summary=f"hand back {plural(len(hosts), 'host')} planned as the train stopped",
        )
