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

Every id below is deprecated by 0.2.0, a version cut: that release re-records the replay
histories once and deletes every ``patched`` call outright (0.1 runs are not replayed by 0.2
workers, so no ``deprecate_patch`` step is needed), leaving this list empty.
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
    "arbiter-frugal-waits": Patch("0.2.0"),
    "arbiter-keeps-first-holder": Patch("0.2.0"),
    "budget-maintenance": Patch("0.2.0"),
    "campaign-blame": Patch("0.2.0"),
    "campaign-failed-endings": Patch("0.2.0"),
    "campaign-prometheus-failure-holds": Patch("0.2.0"),
    "campaign-rollback": Patch("0.2.0"),
    "campaign-rollback-rounds": Patch("0.2.0"),
    "domain-hand-back-visits": Patch("0.2.0"),
    "job-negotiation": Patch("0.2.0"),
    "ops-continue-as-new": Patch("0.2.0"),
    "ops-failed-endings": Patch("0.2.0"),
    "ops-failure-gate": Patch("0.2.0"),
    "ops-lost-to-repair-deferred": Patch("0.2.0"),
    "ops-refusal-release": Patch("0.2.0"),
    "ops-schedule-windows": Patch("0.2.0"),
    "ops-wait-for-room": Patch("0.2.0"),
    "ops-whole-cluster-keeps-refusers": Patch("0.2.0"),
    "poll-wall-cap": Patch("0.2.0"),
    "rack-switch": Patch("0.2.0"),
    "refusal-release": Patch("0.2.0"),
    "train-capped-poll": Patch("0.2.0"),
    "train-domain-tells-at-end": Patch("0.2.0"),
    "train-frugal-domains": Patch("0.2.0"),
    "train-many-rollouts": Patch("0.2.0"),
    "train-plan-apart": Patch("0.2.0"),
    "train-plan-granted": Patch("0.2.0"),
    "train-plan-merged": Patch("0.2.0"),
    "train-rests": Patch("0.2.0"),
    "train-rollout-failures": Patch("0.2.0"),
    "train-schedule-windows": Patch("0.2.0"),
    "train-stop-now": Patch("0.2.0"),
    "train-withdraw-claim": Patch("0.2.0"),
}
