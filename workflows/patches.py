"""Every live patch id of the workflows, with the release that retires it.

A workflow change that alters the commands a run issues goes behind ``workflow.patched(id)``, so
histories recorded before it still replay. A patch then has a lifecycle, as the Temporal SDK
means it: ``workflow.patched(id)`` (new runs take the new branch, old ones replay the old) ->
``workflow.deprecate_patch(id)`` (the old branch deleted, once no open run needs it; the marker
stays, so runs recorded in between still replay) -> removed (the call deleted, once no open run
recorded before the deprecation remains). ``PATCHES`` lists every id the workflows use, with the
release that deprecates it and, once deprecated, the release that removes it.

``scripts/check_patches.py`` (run by ``.ci/run``) keeps this list true: it fails on an id used
under ``workflows/`` that is not listed here, on a listed id no workflow uses, on a
``deprecate_patch`` id with no ``removed_in``, and on a ``patched`` or ``deprecate_patch`` call
still present in the release (``pyproject.toml``'s version) that retires it.

0.2.0 was a version cut: it re-recorded the replay histories once and deleted every
``patched`` call outright (0.1 runs are not replayed by 0.2 workers, which refuse to start
beside them), so the list starts empty again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Patch:
    """Where one patch id stands in its lifecycle."""

    deprecated_in: str
    """The release whose workflows stop calling ``patched`` for this id: they call
    ``deprecate_patch`` instead, or drop the call at a version cut."""
    removed_in: str | None = None
    """Set once the id is deprecated: the release that deletes its ``deprecate_patch`` call."""


#: patch id -> its lifecycle; one entry per id, whichever module (or constant) carries it
PATCHES: dict[str, Patch] = {
    # Campaign stages and operations may wait at approval gates (``fleet_timing.ApprovalGates``).
    "approval-gates": Patch(deprecated_in="0.3.0"),
    # a train with ``soak`` takes no new domain within it of its latest return
    "train-soak": Patch(deprecated_in="0.3.0"),
    # an operation with ``soak`` starts no wave within it of its latest return
    "ops-soak": Patch(deprecated_in="0.3.0"),
    # a train whose ``batch`` policy sees failed domains in a row halts
    "train-batch": Patch(deprecated_in="0.3.0"),
    "ops-rollback-batch": Patch(deprecated_in="0.3.0"),
    "ops-batch-stop": Patch(deprecated_in="0.3.0"),
    # an operation waiting for room words its wait in durations (``2 min``), not decimal hours:
    # the text is in the progress it signals its parent whenever the text changes
    "ops-room-wait-text": Patch(deprecated_in="0.3.0"),
    # an operation runs the waves planned when it began, re-planning only for a recorded reason
    "ops-planned-waves": Patch(deprecated_in="0.3.0"),
}
