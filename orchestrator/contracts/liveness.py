"""A long step's sign of life, passed from the code that waits to whatever runs the step.

An install on a Slurm node waits on the site's hooks, for minutes on a real cluster; Temporal
takes an activity that sends no heartbeat within its heartbeat timeout for dead and starts it
again beside the first. The backends sit below the activities and know nothing of Temporal, so
the activity says what "alive" means for the length of a step (``beating``), and the code that
waits calls ``alive()`` now and then (``fleet.slurm.hooks``). Outside such a step it does
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_BEAT: ContextVar[Callable[[], None] | None] = ContextVar("trainctl_alive", default=None)


@contextmanager
def beating(beat: Callable[[], None] | None) -> Iterator[None]:
    """Within this block, ``alive()`` calls ``beat`` (None: nothing)."""
    token = _BEAT.set(beat)
    try:
        yield
    finally:
        _BEAT.reset(token)


def alive() -> None:
    """Tell whatever runs the current step that it is still working."""
    beat = _BEAT.get()
    if beat is not None:
        beat()


__all__ = ["alive", "beating"]
