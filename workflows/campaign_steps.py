"""The steering and reporting half of a campaign: blame of a failed stage, pausing the trains
its stages ride, handing a whole cluster's targets to its train, the Prometheus gate, the
metrics report, and withdrawing from every train and operation when it ends.

A part of the ``Campaign`` workflow (a mixin over its state), kept apart for size: the workflow
module keeps its handlers, its stage loop, how it starts clusters and operations and looks at
them. How activities are called (``TRAIN_OPTIONS``, ``PROM_OPTIONS``) is defined here once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.campaign_activities import CampaignActivities
    from orchestrator.campaign import gate as gating
    from orchestrator.campaign import progress
    from orchestrator.contracts.campaign_types import (
        BlameRequest,
        BlameResult,
        CampaignInput,
        CampaignReport,
        CampaignState,
        ClusterStage,
        PromAnswer,
        PromQuery,
        StagePlanModel,
        StageStatus,
        TrainHandoff,
    )
    from orchestrator.contracts.errors import PERMANENT_KINDS
    from workflows.fleet_timing import fleet_options

#: Steering a train waits for its worker's answer: retry a busy or silent train for a while;
#: what will not heal (a permanent kind: a bad spec, an unknown cluster) is not retried.
TRAIN_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": timedelta(minutes=10),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        non_retryable_error_types=list(PERMANENT_KINDS),
    ),
}
#: One look at Prometheus: a short query, retried a few times (an unreachable one holds).
PROM_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=20),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}


class CampaignSteps:
    """Blame, pauses, handoffs, gate, report and withdrawal; the workflow provides the state."""

    inp: CampaignInput | None
    st: CampaignState | None
    wake: bool
    reported: CampaignReport | None
    ops: dict[str, Any]

    # Provided by the Campaign workflow.
    def _set_state(self, state: str, reason: str = "") -> None: ...
    async def _nap(self, seconds: float) -> None: ...
    def _lower(self) -> dict[str, str]: ...  # type: ignore[empty-body]
    def _handoff(self, cluster: str, action: str, **kw: object) -> TrainHandoff: ...  # type: ignore[empty-body]

    async def _blame(self, ss: StageStatus) -> None:
        """Name the change behind a failed stage (``status.blame``); its top suspect, if it is
        ours, is marked bad fleet-wide."""
        assert self.st is not None and self.inp is not None
        found: BlameResult = await workflow.execute_activity_method(
            CampaignActivities.blame,
            BlameRequest(
                campaign=self.inp.spec.name,
                stage=ss.name,
                targets=dict(self.inp.spec.targets),
                clusters=list(ss.clusters.values()),
                wall=workflow.now(),
            ),
            **fleet_options(),
        )
        progress.note_blame(self.st, ss, found)

    async def _apply_pause(self, ss: StageStatus) -> None:
        """Pause the trains rolling this stage while the campaign is paused; resume them after."""
        assert self.st is not None
        st = self.st
        if not self._lower():
            return
        if st.paused:
            for cluster, cs in ss.clusters.items():
                if cs.state == "rolling" and cluster not in st.trains_paused:
                    await workflow.execute_activity_method(
                        CampaignActivities.train,
                        self._handoff(cluster, "pause", reason=f"campaign {ss.name} paused"),
                        **TRAIN_OPTIONS,
                    )
                    st.trains_paused.append(cluster)
        elif st.trains_paused:
            for cluster in list(st.trains_paused):
                await workflow.execute_activity_method(
                    CampaignActivities.train,
                    self._handoff(cluster, "resume", reason="campaign resumed"),
                    **TRAIN_OPTIONS,
                )
                st.trains_paused.remove(cluster)

    async def _cluster_done(self, plan: StagePlanModel, cs: ClusterStage) -> None:
        """A whole cluster done: its train keeps the targets as its own (and records them)."""
        if not plan.partial and self._lower():
            await workflow.execute_activity_method(
                CampaignActivities.train,
                self._handoff(cs.cluster, "keep", targets=self._lower()),
                **TRAIN_OPTIONS,
            )

    async def _prometheus_clear(self, plan: StagePlanModel, ss: StageStatus) -> bool:
        """The stage's Prometheus gate: True when its query answers nothing (or there is none)."""
        prom = plan.gates.prometheus
        if prom is None:
            return True
        query = PromQuery(
            url=prom.url, query=prom.query, username=prom.username, password_file=prom.password_file
        )
        try:
            answer: PromAnswer = await workflow.execute_activity_method(
                CampaignActivities.prometheus, query, **PROM_OPTIONS
            )
        except ActivityError as err:
            # A look that fails as an activity (its timeout, a worker lost on every attempt)
            # holds the stage with the reason, as an unreadable answer does.
            if isinstance(err.cause, CancelledError):
                raise
            cause = err.cause if isinstance(err.cause, FailureError) else err
            why = (cause.message.strip().splitlines() or ["no reason given"])[0][:200]
            answer = PromAnswer(firing=-1, error=f"prometheus: the look failed: {why}")
        if gating.note_prometheus(ss, answer):
            return True
        assert self.st is not None
        if self.st.status.state == "running":
            self._set_state("held", f"stage {ss.name} held by Prometheus: {prom.query}")
        self.wake = False
        await self._nap(prom.every_seconds)
        return False

    async def _report(self) -> None:
        """Tell the metrics what changed since the last report (nothing when nothing did)."""
        assert self.st is not None
        status = self.st.status
        gating.roll_up_campaign(status)
        report = progress.campaign_report(status)
        if report != self.reported:
            await workflow.execute_activity_method(
                CampaignActivities.report, report, **fleet_options()
            )
            self.reported = report

    # ------------------------------------------------------------------- finish
