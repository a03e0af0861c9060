"""The capacity arbiter: one entity workflow per cluster (``capacity-<cluster>``) owning its budget.

Trains and bulk operations ask it, before they cordon, how many hosts they may hold. Shared
holders (trains) split the budget; an exclusive holder (a bulk operation over the same hosts)
queues, the others stop taking hosts and hand over as theirs come back, then it runs alone: the
ledger query and the log show who waits for whom. The fleet's own cordon check still counts every
host out of service, so the budget holds even between two answers. A holder whose workflow ended
without releasing is dropped, and whatever it held in the fleet is handed back.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.arbiter_activities import ArbiterActivities
    from activities.fleet_activities import FleetActivities
    from orchestrator.arbiter.ui import arbiter_details
    from orchestrator.contracts.arbiter_types import (
        AcquireRequest,
        ArbiterInput,
        ArbiterState,
        Grant,
        HolderEntry,
        HoldersRequest,
        ReleaseRequest,
    )
    from orchestrator.contracts.messages import HostsRequest
    from orchestrator.contracts.search_attributes import TRAIN_CLUSTER, TRAIN_PHASE
    from orchestrator.contracts.ui_text import plural
    from orchestrator.planning.arbiter_share import would_grant
    from workflows.fleet_timing import fleet_options, history_full

#: Look for dead holders this often while someone waits for capacity, and this often otherwise.
CHECK_WHEN_WAITING = timedelta(seconds=30)
CHECK_WHEN_QUIET = timedelta(hours=1)
LOG_LINES = 50
#: The arbiter continues as new past this many history events (or when the server suggests).
ARBITER_MAX_HISTORY = 5_000


@workflow.defn(name="CapacityArbiter")
class CapacityArbiter:
    def __init__(self) -> None:
        self.state = ArbiterState(cluster="")
        self.changed = False

    @workflow.query(name="ledger")
    def ledger(self) -> ArbiterState:
        return self.state

    @workflow.query(name="would_grant")
    def would_grant(self, req: AcquireRequest) -> Grant:
        """What ``acquire`` would grant ``req`` now, granting nothing (``ops plan`` asks)."""
        return would_grant(self.state, req)

    def _note(self, text: str) -> None:
        self.state.log = [*self.state.log, f"{workflow.now():%Y-%m-%dT%H:%M:%S} {text}"][
            -LOG_LINES:
        ]
        self._show()

    def _show(self) -> None:
        """The arbiter's page in the UI: holders, queue, recent log (not a command)."""
        workflow.set_current_details(arbiter_details(self.state))

    def _budget(self) -> int:
        return min((h.limit for h in self.state.holders.values()), default=0)

    @workflow.update(name="acquire")
    def acquire(self, req: AcquireRequest) -> Grant:
        st = self.state
        entry = st.holders.get(req.holder)
        if entry is None:
            entry = HolderEntry(
                holder=req.holder,
                workflow_id=req.workflow_id,
                kind=req.kind,
                exclusive=req.exclusive,
                want=req.want,
                holding=req.holding,
                granted=0,
                limit=req.limit,
                since=workflow.now(),
            )
            st.holders[req.holder] = entry
            if req.exclusive:
                st.queue.append(req.holder)
            self._note(f"{req.holder} joined ({'exclusive' if req.exclusive else 'shared'})")
        entry.want, entry.holding, entry.limit = req.want, req.holding, req.limit
        others = [h for h in st.holders.values() if h.holder != req.holder]
        if req.exclusive:
            ahead = st.queue[: st.queue.index(req.holder)]
            busy = [h.holder for h in others if h.holding > 0 and h.holder not in ahead]
            if ahead or busy:
                grant = Grant(
                    granted=0,
                    waiting_for=ahead + busy,
                    reason=f"serialised behind {', '.join(ahead + busy)}",
                )
            else:
                grant = Grant(granted=min(req.want, self._budget()))
        elif st.queue:
            grant = Grant(
                granted=0, waiting_for=list(st.queue), reason=f"handing over to {st.queue[0]}"
            )
        else:
            room = self._budget() - sum(h.granted for h in others)
            grant = Grant(granted=max(0, min(req.want, room)))
            if grant.granted < req.want and others:
                grant.reason = "budget shared with " + ", ".join(h.holder for h in others)
            elif grant.granted < req.want:  # alone: the budget itself is smaller than the want
                grant.reason = (
                    f"the maintenance budget allows {plural(self._budget(), 'host')} at once "
                    f"(wanted {req.want})"
                )
        if grant.granted and not entry.granted and entry.exclusive:
            self._note(f"{req.holder} takes over")
        entry.granted = grant.granted
        self.changed = True
        self._show()
        return grant

    @workflow.update(name="release")
    def release(self, req: ReleaseRequest) -> ArbiterState:
        self._drop(req.holder, req.reason)
        return self.state

    def _drop(self, holder: str, reason: str) -> None:
        if self.state.holders.pop(holder, None) is not None:
            self._note(f"{holder} released ({reason})")
        if holder in self.state.queue:
            self.state.queue.remove(holder)
        self.changed = True

    @workflow.run
    async def run(self, inp: ArbiterInput) -> ArbiterState:
        if inp.state is not None:
            self.state = inp.state
        elif self.state.holders:
            # The acquire that started this arbiter (update-with-start) ran before this line:
            # its holder stays (it was dropped, and learned so only at its next ask).
            self.state.cluster = inp.cluster
        else:
            self.state = ArbiterState(cluster=inp.cluster)
        self._show()
        workflow.upsert_search_attributes([TRAIN_CLUSTER.value_set(inp.cluster)])
        # One timer per check, not one per acquire, and an upsert only when the phase changes.
        check: asyncio.Task[None] | None = None
        check_every: timedelta | None = None
        shown_phase: str | None = None
        while True:
            self.changed = False
            wait = CHECK_WHEN_WAITING if self.state.queue else CHECK_WHEN_QUIET
            if check is None or check.done() or check_every != wait:
                if check is not None and not check.done():
                    check.cancel()  # the interval changed (a queue formed or emptied)
                check, check_every = asyncio.ensure_future(workflow.sleep(wait)), wait
            timer = check
            await workflow.wait_condition(lambda t=timer: self.changed or t.done())  # type: ignore[misc]
            if timer.done():
                await self._drop_dead_holders()
            phase = "handover" if self.state.queue else ("shared" if self.state.holders else "idle")
            if phase != shown_phase:
                workflow.upsert_search_attributes([TRAIN_PHASE.value_set(phase)])
                shown_phase = phase
            if not self.state.holders:
                break  # nobody holds anything: the next acquire starts a fresh arbiter
            if history_full(ARBITER_MAX_HISTORY):
                if check is not None and not check.done():
                    check.cancel()
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(ArbiterInput(cluster=inp.cluster, state=self.state))
        if check is not None and not check.done():
            check.cancel()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.state

    async def _drop_dead_holders(self) -> None:
        if not self.state.holders:
            return
        closed: list[str] = await workflow.execute_activity_method(
            ArbiterActivities.closed_workflows,
            HoldersRequest(holders=sorted(h.workflow_id for h in self.state.holders.values())),
            summary="look for holders whose workflow has ended",
            **fleet_options(),
        )
        dead = [h.holder for h in self.state.holders.values() if h.workflow_id in closed]
        for holder in dead:
            # It died holding hosts: hand them back so nothing stays cordoned and forgotten.
            await workflow.execute_activity_method(
                FleetActivities.close_owner,
                HostsRequest(
                    cluster=self.state.cluster, owner=holder, hosts=[], wall=workflow.now()
                ),
                summary=f"hand back what {holder} held: its workflow ended",
                **fleet_options(),
            )
            self._drop(holder, "its workflow ended without releasing")
