"""What a cluster's train asks of the fleet, the arbiter and its domains, built from its spec.

Plain data in, one request out: the ``ClusterTrain`` workflow passes its time (``wall``) and
the hosts its domains hold, so these are deterministic and tested without a workflow.
"""

from __future__ import annotations

from datetime import datetime

from orchestrator.contracts.arbiter_types import AcquireRequest
from orchestrator.contracts.messages import ClockInfo, HostsRequest
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import DomainInput, PlanDomainRequest, TrainState
from orchestrator.execution.batches import domain_size_now


def plan_request(
    spec: TrainSpec,
    state: TrainState,
    wall: datetime,
    max_held: int,
    held: list[str],
    claim_until_hours: float | None,
) -> PlanDomainRequest:
    """The planner's question: up to ``max_held`` hosts held at once (``held`` now), the
    standing claim lapsing at ``claim_until_hours`` (a window's close)."""
    return PlanDomainRequest(
        cluster=spec.cluster,
        owner=spec.workflow_id,
        wall=wall,
        cycle_started_hours=state.cycle_started_hours,
        max_held=max_held,
        budget=spec.budget,
        max_wait_hours=spec.drain.max_wait_hours,
        policy=spec.policy,
        targets=spec.targets,
        in_flight=held,
        cycle_target_hours=spec.cycle_target_hours,
        rollout=spec.rollout,
        rollouts=spec.rollouts,
        rollout_only=spec.rollout_only,
        claim_until_hours=claim_until_hours,
        visit_rule=True,
        resting=state.resting,
        verify_every_hours=spec.verify_every_hours,
    )


def acquire_request(
    spec: TrainSpec, state: TrainState, workflow_id: str, hosts_total: int
) -> AcquireRequest:
    """The arbiter's question: up to ``domain_size`` more hosts. What the arbiter splits among
    the cluster's owners is the maintenance budget (planned work of every owner together); the
    floor is the fleet's own check at each cordon."""
    return AcquireRequest(
        cluster=spec.cluster,
        holder=spec.workflow_id,
        workflow_id=workflow_id,
        kind="train",
        want=domain_size_now(spec.domain_size, spec.batch, state.batch_size),
        holding=state.counts.in_flight,
        limit=max(1, spec.budget.maintenance_limit(hosts_total)),
    )


def hosts_request(spec: TrainSpec, hosts: list[str], wall: datetime) -> HostsRequest:
    """A fleet step on ``hosts`` owned by this train, with its targets."""
    return HostsRequest(
        cluster=spec.cluster,
        owner=spec.workflow_id,
        hosts=hosts,
        wall=wall,
        targets=spec.targets,
    )


def domain_input(
    spec: TrainSpec,
    clock: ClockInfo,
    domain_id: str,
    hosts: list[str],
    targets: dict[str, str] | None,
    start_hours: float,
) -> DomainInput:
    """A domain's input (``targets``: a rollout's, else the train's), planned at fleet hour
    ``start_hours``."""
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
        cycle_target_hours=spec.cycle_target_hours,
    )
