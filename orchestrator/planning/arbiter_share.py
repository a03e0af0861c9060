"""What a cluster's capacity arbiter would grant a request now, without granting it.

The ``would_grant`` query of ``CapacityArbiter`` answers with this (a query: no state change,
nothing in the history), so ``ops plan`` can cut waves of the size the operation will really
get. The rule is the arbiter's ``acquire``: the budget is the smallest limit any holder (the
asker included) reads; an exclusive holder gets all of it once those ahead of it and those
holding hosts have handed over, a shared one what the other holders leave.
"""

from __future__ import annotations

from orchestrator.contracts.arbiter_types import AcquireRequest, ArbiterState, Grant


def would_grant(state: ArbiterState, req: AcquireRequest) -> Grant:
    """The hosts ``req`` would be let hold at once, and whom it would wait for first."""
    others = [h for h in state.holders.values() if h.holder != req.holder]
    budget = min([req.limit, *(h.limit for h in others)])
    if req.exclusive:
        queue = state.queue
        ahead = queue[: queue.index(req.holder)] if req.holder in queue else list(queue)
        busy = [h.holder for h in others if h.holding > 0 and h.holder not in ahead]
        grant = Grant(granted=min(req.want, budget), waiting_for=ahead + busy)
    elif state.queue:
        grant = Grant(granted=0, waiting_for=list(state.queue))
    else:
        room = budget - sum(h.granted for h in others)
        grant = Grant(granted=max(0, min(req.want, room)))
    smaller = [h.holder for h in others if h.limit == budget and budget < req.limit]
    if smaller:
        grant.reason = f"the budget is {budget} hosts as {', '.join(smaller)} reads it"
    if grant.waiting_for:
        grant.reason = "; ".join(
            filter(None, [grant.reason, f"after {', '.join(grant.waiting_for)} hand over"])
        )
    return grant
