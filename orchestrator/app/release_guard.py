"""A worker of this release refuses to start beside open workflows of the release before it.

0.2.0 was a version cut: its workflows issue other commands than 0.1's (the logical clock and
every ``workflow.patched`` branch are gone), so a 0.1 run's history does not replay on a 0.2
worker, which would fail its tasks over and over. The worker looks first: every open trainctl
workflow on its task queue whose first workflow task was completed by a worker that did not
name this release series in its identity (``worker_identity``: ``trainctl/<release>``) is a
run of an older release. Finding any, ``trainctl worker`` exits 2 naming them and the upgrade
steps (CHANGELOG.md): stop those trains, operations and campaigns with the old release, then
start the new worker and start them again.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from orchestrator.contracts.constants import RELEASE

#: What a worker of this release series puts in its identity (``fleet_id.worker_identity``).
RELEASE_TAG = "trainctl/"
#: The workflow types that outlive a release: trains, operations, campaigns, arbiters (their
#: children, domains and cluster parts, end with them).
LONG_LIVED = ("ClusterTrain", "BulkOperation", "ClusterOperation", "Campaign", "CapacityArbiter")


def series(release: str) -> str:
    """``0.2`` for ``0.2.0``: releases of one series replay each other's histories."""
    return ".".join(release.split(".")[:2])


def is_this_series(identity: str) -> bool:
    """Whether a worker identity names a release of this series."""
    tag = f"{RELEASE_TAG}{series(RELEASE)}."
    return any(word.startswith(tag) for word in identity.split())


async def first_task_identity(client: Client, workflow_id: str, run_id: str) -> str | None:
    """The identity of the worker that completed the run's first workflow task (None: none
    has yet, so no release has made a command in it)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return event.workflow_task_completed_event_attributes.identity
    return None


async def older_open_runs(client: Client, task_queue: str) -> list[str]:
    """Ids of the open long-lived workflows on ``task_queue`` an older release ran."""
    types = ", ".join(f"'{t}'" for t in LONG_LIVED)
    query = (
        f"ExecutionStatus = 'Running' AND TaskQueue = '{task_queue}' AND WorkflowType IN ({types})"
    )
    older: list[str] = []
    async for wf in client.list_workflows(query):
        identity = await first_task_identity(client, wf.id, wf.run_id)
        if identity is not None and not is_this_series(identity):
            older.append(wf.id)
    return sorted(older)


def refusal(ids: list[str]) -> str:
    """The message a worker refusing to start gives (exit 2, field ``worker``)."""
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return (
        f"worker: {len(ids)} workflow(s) of an older trainctl are open on this namespace "
        f"({shown}); trainctl {RELEASE} cannot replay them. Stop them with the release that "
        "started them (`trainctl train stop`, `ops abort`, `campaign abort`) and let its worker "
        "finish them, then start this worker and start them again (see CHANGELOG.md)"
    )
