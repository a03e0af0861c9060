"""When a long-lived workflow should continue as new: one test of its history's size.

The server suggests it, or the history passed the workflow's own ``max_history_events``. Reads
``workflow.info()`` only (no command), so it lives beside the workflows that ask it.
"""

from __future__ import annotations

from temporalio import workflow


def history_full(max_events: int, *, suggested: bool = True) -> bool:
    """Past ``max_events`` history events, or (with ``suggested``) the server suggests it."""
    info = workflow.info()
    if suggested and info.is_continue_as_new_suggested():
        return True
    return info.get_current_history_length() > max_events
