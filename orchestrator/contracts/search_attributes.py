"""Custom search attributes, with the stable names the server, workflows and CLI agree on.

Workflows import this module inside the Temporal sandbox, so it imports nothing but ``temporalio``.
The dev server registers these at start (``--search-attribute``); a production cluster needs them
created once with ``temporal operator search-attribute create``.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

TRAIN_CLUSTER: SearchAttributeKey[str] = SearchAttributeKey.for_keyword("TrainCluster")
"""Cluster a workflow acts on (``c00``), so the UI and ``list_workflows`` can filter by it."""

TRAIN_CAMPAIGN: SearchAttributeKey[str] = SearchAttributeKey.for_keyword("TrainCampaign")
"""Campaign (train or bulk operation) a workflow belongs to."""

TRAIN_PHASE: SearchAttributeKey[str] = SearchAttributeKey.for_keyword("TrainPhase")
"""Current phase (cordon, drain, update, verify, ...), upserted as the workflow moves on."""

SEARCH_ATTRIBUTES: tuple[SearchAttributeKey[str], ...] = (
    TRAIN_CLUSTER,
    TRAIN_CAMPAIGN,
    TRAIN_PHASE,
)
"""Every custom search attribute the project uses; servers must register all of them."""
