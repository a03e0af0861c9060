"""Who holds a full budget: the hosts out of service, grouped by holder, and the next command.

A train or an operation that waits for room names what it waits on, so on-call need not search:
at most ``SHOWN`` hosts, grouped by who holds them (quarantine, repair, the site's own drain
with its reason, another trainctl owner), a count of the rest, and the command that explains a
host. Pure: reads host views only.
"""

from __future__ import annotations

from collections.abc import Iterable

from orchestrator.contracts.constants import NO_OWNER, QUARANTINE_OWNER, REPAIR_OWNER
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import HostView

#: Hosts named in one message; the rest are counted.
SHOWN = 10
#: A host's reason is cut to this many characters in the message.
REASON_CHARS = 40


def holder(h: HostView) -> str:
    """Who holds an out-of-service host, in words."""
    if h.owner == QUARANTINE_OWNER:
        return "quarantined"
    if h.owner == REPAIR_OWNER or h.state == HostState.IN_REPAIR:
        return "in repair"
    if h.owner == NO_OWNER:
        return "out of service, not held by trainctl (the site or a failure)"
    return f"held by {h.owner}"


def _named(h: HostView) -> str:
    reason = h.reason.strip()
    if not reason:
        return h.name
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 3].rstrip() + "..."
    return f"{h.name} ({reason})"


def budget_holders(hosts: Iterable[HostView]) -> str:
    """``quarantined: h1 (why), h2; in repair: h3; and 4 more. See why: trainctl fleet host h1``
    for the hosts out of service among ``hosts``, or "" when none is."""
    out = sorted((h for h in hosts if h.state != HostState.IN_SERVICE), key=lambda h: h.name)
    if not out:
        return ""
    groups: dict[str, list[str]] = {}
    for h in out[:SHOWN]:
        groups.setdefault(holder(h), []).append(_named(h))
    text = "; ".join(f"{who}: {', '.join(names)}" for who, names in groups.items())
    if len(out) > SHOWN:
        text += f"; and {len(out) - SHOWN} more"
    return f"{text}. See why: trainctl fleet host {out[0].name}"
