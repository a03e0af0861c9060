"""One maintenance domain: drain its cordoned hosts, update, verify, return or quarantine.

The hosts arrive cordoned by the train. Hosts free of jobs go straight to their updates; hosts
with a job wait as the drain policy says (to the job's end, or its next checkpoint, then evict,
never past the deadline). Whatever happens, including cancellation of the train, every host
leaves this workflow back in service (verified), quarantined with a reason, or with the repair
pipeline: the ``finally`` hands back anything still held.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.execution.drain import DrainTracker
    from orchestrator.execution.messages import (
        DrainStatus,
        EvictRequest,
        HostsRequest,
        UpdateResult,
        VerifyResult,
    )
    from orchestrator.train.types import DomainInput, DomainProgress, DomainResult
    from workflows.fleet_clock import aside, clock_party, fleet_options, sleep_until, spawn, wake


@workflow.defn(name="DomainMaintenance")
class DomainMaintenance:
    def __init__(self) -> None:
        self.phase = "draining"
        self.waiting: dict[str, str] = {}

    @workflow.query(name="phase")
    def current_phase(self) -> dict[str, object]:
        return {"phase": self.phase, "waiting": self.waiting}

    def _req(self, inp: DomainInput, hosts: list[str], **kw: object) -> HostsRequest:
        return HostsRequest(
            cluster=inp.cluster,
            owner=inp.owner,
            hosts=hosts,
            wall=workflow.now(),
            targets=inp.targets,
            policy=inp.policy,
            visit=inp.visit,
            **kw,  # type: ignore[arg-type]
        )

    @workflow.run
    async def run(self, inp: DomainInput) -> DomainResult:
        if inp.clock.logical:  # a party of its cluster's clock, acting from its start
            inp.clock = inp.clock.model_copy(update={"cluster": inp.cluster})
            clock_party(inp.clock, owner=inp.owner)
        result = DomainResult(domain_id=inp.domain_id)
        pending = list(inp.hosts)
        tasks: list[asyncio.Task[None]] = []
        tracker: DrainTracker | None = None  # made at the first look, with the real deadline
        try:
            while pending:
                status: DrainStatus = await workflow.execute_activity_method(
                    FleetActivities.drain_status,
                    self._req(
                        inp, pending, deadline_hours=tracker.deadline_hours if tracker else 0.0
                    ),
                    **fleet_options(),
                )
                now = status.fleet_hours
                if tracker is None:
                    tracker = DrainTracker(now + inp.max_wait_hours)
                    continue  # ask again with the real deadline
                for host, why in status.lost.items():
                    result.lost_to_repair[host] = why
                for host in list(status.lost) + status.ready:
                    pending.remove(host)
                if status.ready:
                    tasks.append(spawn(inp.clock, self._maintain(inp, status.ready, result)))
                decision = tracker.decide(status.waits, now)
                if decision.evict:
                    self.phase = "evicting"
                    res = await workflow.execute_activity_method(
                        FleetActivities.evict_jobs,
                        EvictRequest(
                            cluster=inp.cluster,
                            owner=inp.owner,
                            job_ids=decision.evict,
                            wall=workflow.now(),
                            scheduled_hours=decision.scheduled_hours,
                        ),
                        **fleet_options(),
                    )
                    result.jobs_interrupted += res.interrupted
                    result.lost_gpu_hours += res.lost_gpu_hours
                    continue
                if decision.wake_at_hours is not None:
                    self.phase = "draining"
                    self.waiting = {
                        str(w.job_id): f"{w.action} at fleet hour {w.at_hours:.2f}"
                        for w in status.waits
                    }
                    await sleep_until(inp.clock, decision.wake_at_hours, now)
            self.waiting = {}
            await aside(inp.clock, asyncio.gather(*tasks))
        except (asyncio.CancelledError, CancelledError):
            self.phase = "cancelled: handing hosts back"
            for t in tasks:
                t.cancel()
            await self._hand_back(inp, result)
            raise
        except BaseException:
            await self._hand_back(inp, result)
            raise
        self.phase = "done"
        return result

    async def _maintain(self, inp: DomainInput, hosts: list[str], result: DomainResult) -> None:
        """Update, wait out the install in fleet time, verify, return or quarantine."""
        self.phase = "updating"
        upd: UpdateResult = await workflow.execute_activity_method(
            FleetActivities.apply_updates, self._req(inp, hosts), **fleet_options(heartbeat=True)
        )
        if upd.failed:
            q: VerifyResult = await workflow.execute_activity_method(
                FleetActivities.quarantine_hosts,
                self._req(inp, sorted(upd.failed), reason="update failed"),
                **fleet_options(),
            )
            result.quarantined.update({h: upd.failed[h] for h in q.quarantined})
            result.outcomes += [False] * len(q.quarantined)
            await self._tell_parent(inp, [False] * len(q.quarantined))
        if not upd.updated:
            return
        await sleep_until(inp.clock, upd.fleet_hours + upd.duration_hours, upd.fleet_hours)
        self.phase = "verifying"
        ver: VerifyResult = await workflow.execute_activity_method(
            FleetActivities.verify_and_return, self._req(inp, upd.updated), **fleet_options()
        )
        result.returned += ver.returned
        result.quarantined.update(ver.quarantined)
        outcomes = [h in ver.returned for h in sorted([*ver.returned, *ver.quarantined])]
        result.outcomes += outcomes
        await self._tell_parent(inp, outcomes)

    async def _tell_parent(self, inp: DomainInput, outcomes: list[bool]) -> None:
        """Tell the train how a batch went, as it happens: it counts failures (and may halt)
        at once, and hosts went back, so it may take more before this domain ends."""
        parent = workflow.info().parent
        if parent is not None:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                "domain_progress", DomainProgress(domain_id=inp.domain_id, outcomes=outcomes)
            )
            # On a logical clock the train takes its turn at this instant, once we wait.
            wake(inp.clock, parent.workflow_id)

    async def _hand_back(self, inp: DomainInput, result: DomainResult) -> None:
        """Release untouched hosts and verify touched ones, so none is left cordoned."""
        back: VerifyResult = await workflow.execute_activity_method(
            FleetActivities.release_hosts, self._req(inp, list(inp.hosts)), **fleet_options()
        )
        result.released += back.returned
        result.quarantined.update(back.quarantined)
