"""How ``DomainMaintenance`` hands hosts back and tells its train: a refusing job's hosts back
untouched, the train told of a batch as it happens, and everything still held handed back when
the domain ends early (cancelled or failed), so no host is left cordoned.

A part of the ``DomainMaintenance`` workflow (a mixin over its state), kept apart for size.
"""

from __future__ import annotations

import contextlib

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.messages import HostsRequest, VerifyResult
    from orchestrator.contracts.train_types import DomainInput, DomainProgress, DomainResult
    from orchestrator.contracts.ui_text import names, plural
    from orchestrator.execution import drain_sequence as ds
    from workflows.fleet_timing import fleet_call


class DomainHandBack:
    """The hand-back steps; the workflow class provides its state, its UI and ``_req``."""

    def _mark(self, hosts: list[str], phase: str, note: str) -> None:
        raise NotImplementedError

    def _show(self) -> None:
        raise NotImplementedError

    def _req(self, inp: DomainInput, hosts: list[str], **kw: object) -> HostsRequest:
        raise NotImplementedError

    async def _release_refused(
        self, inp: DomainInput, cmd: ds.Release, result: DomainResult
    ) -> None:
        """Hand the hosts of jobs that said "not now" back untouched (no visit): the budget
        goes to hosts that can be drained now; the train takes them again once the job may be
        asked again (``DrainTracker.release``). The train is told: it has room to plan."""
        hosts = cmd.hosts
        back: VerifyResult = await fleet_call(
            FleetActivities.release_hosts,
            self._req(inp, hosts),
            summary=f"hand back {plural(len(hosts), 'host')} of job "
            f"{names([str(j) for j in sorted(cmd.jobs)])}: not now",
        )
        self._mark(hosts, "released", "its job said not now: handed back, asked again later")
        self._show()
        result.released += back.returned
        result.quarantined.update(back.quarantined)
        await self._tell_parent(inp, [], released=hosts)

    async def _tell_parent(
        self, inp: DomainInput, outcomes: list[bool], released: list[str] | None = None
    ) -> None:
        """Tell the train how a batch went, as it happens: it counts failures (and may halt)
        at once, and hosts went back, so it may take more before this domain ends."""
        progress = DomainProgress(
            domain_id=inp.domain_id, outcomes=outcomes, released=list(released or [])
        )
        parent = workflow.info().parent
        if parent is not None:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                "domain_progress", progress
            )

    async def _hand_back(self, inp: DomainInput, result: DomainResult) -> None:
        """Release untouched hosts and verify touched ones, so none is left cordoned."""
        back: VerifyResult = await fleet_call(
            FleetActivities.release_hosts,
            self._req(inp, list(inp.hosts)),
            summary=f"hand back {plural(len(inp.hosts), 'host')} not yet done",
        )
        self._mark(back.returned, "released", "handed back to service")
        for h, why in back.quarantined.items():
            self._mark([h], "quarantined", why)
        self._show()
        result.released += back.returned
        result.quarantined.update(back.quarantined)
        parent = workflow.info().parent
        if back.visited and parent is not None:
            # This domain ends without a result: tell the train which hosts it visited.
            with contextlib.suppress(Exception):  # a train already gone counts nothing
                await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                    "domain_progress",
                    DomainProgress(domain_id=inp.domain_id, visited=list(back.visited)),
                )
