"""Which campaign state takes which operator control: the pure half of its update validators.

``pause``, ``resume`` and ``abort`` are refused (a ValueError the client shows as one line) in a
state that does not take them. The workflow keeps the validators on its class, where Temporal
finds them; their rule lives here, over plain data.
"""

from __future__ import annotations

from orchestrator.contracts.campaign_types import CampaignState

#: The top-level states each control is taken in.
ALLOWED_STATES: dict[str, tuple[str, ...]] = {
    "pause": ("running", "held", "waiting_for_approval"),
    "resume": ("paused",),
    "abort": ("running", "held", "paused", "waiting_for_approval"),
}


def require_state(st: CampaignState | None, action: str) -> None:
    """Refuse ``action`` on a campaign in ``st`` (None: not started yet). A campaign held on
    blame takes a resume in any state: the operator takes the blame on."""
    if action == "resume" and st is not None and st.status.held_on_blame:
        return
    if st is None:
        raise ValueError(f"cannot {action} a campaign that has not started")
    if st.status.state not in ALLOWED_STATES[action]:
        raise ValueError(f"cannot {action} a campaign that is {st.status.state}")
