"""What a campaign does when a stage fails and blame names one of its versions.

``on_failure: rollback`` (the default): the campaign withdraws from every train and operation,
then puts each host that got the blamed version back on the version it had before, through the
same drain/verify core as every change (``planning.rollback`` says which hosts and to what):

- hosts in service: one ``BulkOperation`` child per cluster and set of previous versions
  (``kind: lower-layer``, or ``cuda-upgrade`` for driver/CUDA, whose consistency groups move a
  job's hosts together), draining with care for jobs, verifying, returning;
- hosts the bad build put out of service: reclaimed from quarantine (no job to drain),
  reinstalled, waited out in fleet time, verified and returned (or quarantined again).

It ends ``rolled_back``. ``on_failure: hold`` keeps every host as it is: the campaign waits in
state ``held`` (the ``trainctl_campaign_held_on_blame`` gauge and the ``CampaignHeldOnBlame``
alert fire) until an operator resumes it (the stage's failures so far are then forgiven) or
aborts it. Either way the version is marked bad, so trains and operations installing it hold.

A mixin of the ``Campaign`` workflow (its state and helpers), kept apart for size.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.campaign_activities import CampaignActivities
    from activities.ops_activities import OpsActivities
    from orchestrator.campaign.progress import touched_clusters
    from orchestrator.contracts.campaign_types import (
        BakeClockRequest,
        CampaignInput,
        CampaignState,
        ClusterRollback,
        ReclaimRequest,
        ReclaimResult,
        RollbackGroup,
        RollbackPlan,
        RollbackPlanRequest,
        StageStatus,
    )
    from orchestrator.contracts.messages import VerifyOutcome
    from orchestrator.contracts.models import UPPER_LAYER
    from orchestrator.contracts.ops_spec import OperationSpec, Scope
    from orchestrator.contracts.ops_types import OperationStatus, VerifyRequest
    from workflows.fleet_timing import fleet_options


#: Looks at what is left to roll back (hosts a train still held may come back quarantined).
ROLLBACK_ROUNDS = 3


def _pairs(blamed: dict[str, str]) -> str:
    return ", ".join(f"{c}={v}" for c, v in sorted(blamed.items()))


class RollbackSteps:
    """The failure half of a campaign: hold on blame, or roll the blamed version back."""

    inp: CampaignInput | None
    st: CampaignState | None
    wake: bool

    # Provided by the Campaign workflow.
    def _set_state(self, state: str, reason: str = "") -> None: ...
    async def _report(self) -> None: ...
    async def _withdraw(self, outcome: str) -> None: ...
    async def _nap(self, seconds: float) -> None: ...
    async def _operation(self, op_spec: OperationSpec) -> OperationStatus | str:
        raise NotImplementedError

    async def _after_failure(self, ss: StageStatus) -> str:
        """failed (blame named nothing of ours) | resume | aborted | rolled_back."""
        assert self.st is not None and self.inp is not None
        if not self.st.blamed:
            return "failed"
        if self.inp.spec.on_failure == "hold":
            return await self._hold_on_blame(ss)
        return await self._roll_back(ss)

    async def _hold_on_blame(self, ss: StageStatus) -> str:
        """Wait, hosts as they are, for ``resume`` (failures forgiven) or ``abort``."""
        assert self.st is not None
        st = self.st
        why = (
            f"stage {ss.name} failed and blame names {_pairs(st.blamed)} (marked bad): held with "
            "every host as it is; clear the version (`trainctl versions clear`) and resume, or "
            "abort"
        )
        st.status.held_on_blame = True
        self._set_state("held", why)
        await self._report()
        await workflow.wait_condition(lambda: bool(st.abort) or not st.status.held_on_blame)
        if st.abort:
            return "aborted"
        for cs in ss.clusters.values():  # the operator judged these: they count no more
            cs.baseline_out = sorted({*cs.baseline_out, *cs.failed})
            cs.failed = {}
            if cs.state == "failed":
                cs.state, cs.reason = "pending", ""
        ss.state, ss.reason = "running", ""
        st.blamed = {}
        return "resume"

    async def _roll_back(self, ss: StageStatus) -> str:
        assert self.st is not None and self.inp is not None
        st = self.st
        pairs = _pairs(st.blamed)
        self._set_state(
            "rolling_back",
            f"stage {ss.name} failed and blame names {pairs}: rolling back the hosts that got it",
        )
        await self._report()
        await self._withdraw("rolling back")
        touched = touched_clusters(st.status)
        notes: dict[str, str] = {}  # cluster -> what could not be rolled back
        # Hosts still held by a train when we look (its domain in flight) may come back
        # quarantined after the operation took its scope: look again, up to ROLLBACK_ROUNDS,
        # until nothing is left to do.
        for round_no in range(ROLLBACK_ROUNDS):
            plan: RollbackPlan = await workflow.execute_activity_method(
                CampaignActivities.rollback_plan,
                RollbackPlanRequest(
                    campaign=self.inp.spec.workflow_id,
                    clusters=touched,
                    blamed=dict(st.blamed),
                    wall=workflow.now(),
                ),
                **fleet_options(),
            )
            work = plan.clusters
            if round_no > 0:
                work = [cr for cr in plan.clusters if cr.groups or cr.reclaim]
                if not work:
                    break
            said = await asyncio.gather(*(self._roll_back_cluster(cr, round_no) for cr in work))
            notes.update({cr.cluster: note for cr, note in zip(work, said, strict=True)})
        left = [n for _, n in sorted(notes.items()) if n]
        st.status.reason = f"stage {ss.name} failed; blame names {pairs}; rolled back " + (
            f"{st.status.hosts_rolled_back} hosts to their previous versions"
            + (f"; {'; '.join(left)}" if left else "")
        )
        return "rolled_back"

    async def _roll_back_cluster(self, cr: ClusterRollback, round_no: int = 0) -> str:
        """Roll one cluster back: the reclaimed hosts, then operations for hosts in service.
        What could not be rolled back, in words ('' when everything was)."""
        assert self.st is not None
        left: list[str] = []
        if cr.reclaim:  # first: back in service, they make room for the drains
            left += await self._reclaim(cr)
        for i, group in enumerate(cr.groups):
            result = await self._operation(self._rollback_spec(cr.cluster, i, group, round_no))
            if isinstance(result, str):
                left.append(f"{cr.cluster}: rollback operation failed: {result}")
                continue
            self.st.status.hosts_rolled_back += result.hosts_changed
            if result.state != "succeeded":
                left.append(f"{cr.cluster}: rollback operation {result.state}: {result.reason}")
        if cr.unknown:
            left.append(
                f"{cr.cluster}: {len(cr.unknown)} hosts carry it with no earlier version on "
                f"record (e.g. {cr.unknown[0]}), left as they are"
            )
        return "; ".join(left)

    def _rollback_spec(
        self, cluster: str, i: int, group: RollbackGroup, round_no: int = 0
    ) -> OperationSpec:
        assert self.inp is not None
        upper = any(c in UPPER_LAYER for c in group.targets)
        nth = f"r{round_no}-" if round_no else ""
        fields: dict[str, Any] = {
            "kind": "cuda-upgrade" if upper else "lower-layer",
            "scope": Scope(cluster=cluster, hosts=group.hosts),
            "targets": group.targets,
            "request_id": f"{self.inp.spec.name}-rollback-{cluster}-{nth}{i}",
            # Sized as the campaign's own train: a rollback is the campaign's work.
            "budget": self.inp.spec.train.budget,
            # No waiting for repairs: refused when there is no room now, the next round
            # (after the quarantined hosts were reclaimed) looks again.
            "max_wait_for_room": 0,
        }
        if self.inp.spec.train.drain is not None:
            fields["drain"] = self.inp.spec.train.drain
        if self.inp.spec.schedule is not None:
            fields["schedule"] = self.inp.spec.schedule
        return OperationSpec.model_validate(fields)

    async def _reclaim(self, cr: ClusterRollback) -> list[str]:
        """Hosts the bad build took out: reclaim, reinstall, wait the install out, verify."""
        assert self.st is not None and self.inp is not None
        owner = self.inp.spec.workflow_id
        res: ReclaimResult = await workflow.execute_activity_method(
            CampaignActivities.reclaim,
            ReclaimRequest(
                cluster=cr.cluster,
                owner=owner,
                wall=workflow.now(),
                previous=cr.reclaim,
                reason=f"rolling back {_pairs(self.st.blamed)} ({owner})",
            ),
            **fleet_options(heartbeat=True),
        )
        if res.updated:
            await self._wait_fleet(cr.cluster, res.fleet_hours + res.duration_hours)
        back: VerifyOutcome = await workflow.execute_activity_method(
            OpsActivities.verify,
            VerifyRequest(
                cluster=cr.cluster,
                owner=owner,
                wall=workflow.now(),
                hosts=res.updated,
                per_host={h: cr.reclaim[h] for h in res.updated},
                return_passed=True,
                quarantine_failed=True,
                reason=f"{owner}: failed after rollback",
            ),
            **fleet_options(),
        )
        self.st.status.hosts_rolled_back += len(back.passed)
        left = []
        if res.left:
            left.append(f"{cr.cluster}: {len(res.left)} hosts out of service left to repair")
        if res.failed or back.failed:
            left.append(
                f"{cr.cluster}: {len(res.failed) + len(back.failed)} hosts failed after rollback "
                "(quarantined)"
            )
        return left

    async def _wait_fleet(self, cluster: str, end_hours: float) -> None:
        """Until the cluster's fleet clock reaches ``end_hours``."""
        assert self.inp is not None
        while True:
            now: float = await workflow.execute_activity_method(
                CampaignActivities.bake_clock,
                BakeClockRequest(cluster=cluster, target_hours=end_hours),
                **fleet_options(),
            )
            if now >= end_hours - 1e-9:
                return
            self.wake = False
            await self._nap(self.inp.poll_seconds)
