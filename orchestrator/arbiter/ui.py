"""What the Temporal UI shows for a cluster's capacity arbiter: who holds the budget, who waits.

Pure: the workflow calls it whenever its ledger changes (markdown from
``orchestrator.contracts.ui_text``).
"""

from __future__ import annotations

from orchestrator.contracts.arbiter_types import ArbiterState
from orchestrator.contracts.ui_text import bounded, item_list, names, plural

#: Recent ledger lines shown under the table (the ``ledger`` query has the rest).
LOG_SHOWN = 8


def arbiter_details(st: ArbiterState) -> str:
    """The arbiter page's current details (markdown)."""
    budget = min((h.limit for h in st.holders.values()), default=0)
    if st.queue:
        head = f"**Handing over** · {st.queue[0]} waits to run alone on {st.cluster}"
    elif st.holders:
        n = len(st.holders)
        verb = "holds" if n == 1 else "share"
        head = f"**Shared** · {plural(n, 'holder')} {verb} {st.cluster}'s budget"
    else:
        head = f"**Idle** · nobody holds hosts of {st.cluster}"
    # What the arbiter splits is the maintenance budget (planned work of every owner), the
    # figure the train page shows as "maintenance", not its floor (max_unavailable).
    lines = [
        head,
        "",
        f"- **Maintenance budget:** {plural(budget, 'host')} held for planned work at most, "
        "shared by every owner (the floor, max_unavailable, is checked by the fleet at each "
        "cordon)",
    ]
    if st.queue:
        lines.append(f"- **Queue (run alone, in order):** {names(st.queue)}")
    if st.holders:
        lines.append("")
        lines += item_list(
            ["holder", "kind", "holds", "granted", "wants", "since"],
            (
                (
                    h.holder,
                    h.kind + (" (alone)" if h.exclusive else ""),
                    h.holding,
                    h.granted,
                    h.want,
                    f"{h.since:%Y-%m-%d %H:%M:%S}",
                )
                for h in sorted(st.holders.values(), key=lambda h: h.holder)
            ),
            what="holders",
        )
    if st.log:
        lines += ["", "**Recent:**", ""] + [f"- {line}" for line in st.log[-LOG_SHOWN:]]
    return bounded("\n".join(lines))
