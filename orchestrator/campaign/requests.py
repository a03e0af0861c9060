"""What a campaign hands on: the layers of its targets, train handoffs, bulk operation specs.

A stage's lower-layer targets ride the cluster's train (a ``TrainHandoff``), its driver/CUDA
targets run as a ``BulkOperation`` child (an ``OperationSpec``). Both are built from the spec and
the stage alone, so they live here as pure functions; the workflow sends them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from orchestrator.campaign.gate import operation_max_failures
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import (
    CampaignStatus,
    ClusterStage,
    ProgressRequest,
    StagePlanModel,
    StageStatus,
    TrainHandoff,
)
from orchestrator.contracts.models import UPPER_LAYER
from orchestrator.contracts.ops_spec import OperationSpec, Scope


def lower_targets(targets: dict[str, str]) -> dict[str, str]:
    """The targets a train rolls (everything below the driver)."""
    return {c: v for c, v in targets.items() if c not in UPPER_LAYER}


def upper_targets(targets: dict[str, str]) -> dict[str, str]:
    """The driver/CUDA targets, rolled by a bulk operation (a job's hosts move together)."""
    return {c: v for c, v in targets.items() if c in UPPER_LAYER}


def train_handoff(spec: CampaignSpec, cluster: str, action: str, **kw: object) -> TrainHandoff:
    """A message to ``cluster``'s train: ride, keep, end, stop, pause or resume."""
    return TrainHandoff(
        campaign=spec.workflow_id,
        cluster=cluster,
        action=action,
        domain_size=spec.train.domain_size,
        budget=spec.train.budget.model_dump(),
        drain=None if spec.train.drain is None else spec.train.drain.model_dump(by_alias=True),
        schedule=spec.schedule,
        supersedes=spec.supersedes,  # an activity input only: no command changes
        **kw,  # type: ignore[arg-type]
    )


def stage_operation_spec(
    spec: CampaignSpec, plan: StagePlanModel, stage: str, cs: ClusterStage
) -> OperationSpec:
    """Driver/CUDA targets: one bulk operation over the stage's hosts of this cluster."""
    limit = operation_max_failures(plan, cs)
    fields: dict[str, Any] = {
        "kind": "cuda-upgrade",
        "scope": Scope(cluster=cs.cluster, hosts=cs.hosts),
        "targets": upper_targets(spec.targets),
        "request_id": f"{spec.name}-{stage}-{cs.cluster}",
        # the campaign's budget holds for its operations as for the trains it starts: the
        # default operation budget (one host of a small cluster) stalls on one host in repair
        "budget": spec.train.budget,
    }
    if limit is not None:
        fields["max_failures"] = limit
    if spec.train.drain is not None:
        fields["drain"] = spec.train.drain
    if spec.schedule is not None:  # waves start only inside the campaign's windows
        fields["schedule"] = spec.schedule
    return OperationSpec.model_validate(fields)


def approve_command(workflow_id: str, stage: str, gate: str) -> str:
    """The exact command that approves a gate of the campaign run ``workflow_id`` (a ``--cron``
    run has an id of its own; the approver: the OS user, or ``--approver``)."""
    return f"trainctl campaign approve --id {workflow_id} --stage {stage} --gate {gate}"


def cost_owners(spec: CampaignSpec, status: CampaignStatus, cluster: str) -> list[str]:
    """Who holds hosts for the campaign in ``cluster``: itself and its operations there."""
    ops = [
        s.clusters[cluster].operation_id
        for s in status.stages
        if cluster in s.clusters and s.clusters[cluster].operation_id
    ]
    return [spec.workflow_id, *ops]


def progress_request(
    spec: CampaignSpec,
    status: CampaignStatus,
    ss: StageStatus,
    cs: ClusterStage,
    targets: dict[str, str],
    wall: datetime,
) -> ProgressRequest:
    """The look at one cluster of a stage: how far ``targets`` got on its hosts, and the cost."""
    return ProgressRequest(
        cluster=cs.cluster,
        campaign=spec.name,
        stage=ss.name,
        hosts=cs.hosts,
        baseline_out=cs.baseline_out,
        targets=targets,
        wall=wall,
        owners=cost_owners(spec, status, cs.cluster),
    )
