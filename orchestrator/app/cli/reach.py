"""Reaching Temporal from the CLI: one way to try (``try_connect``), one way to insist
(``connect_or_fail``: exit 2 for a bad setting, exit 1 naming ``address`` when nobody answers),
and the check that the server's workers serve this fleet (``check_same_fleet``). No message
carries a secret (API key, gRPC metadata)."""

from __future__ import annotations

import dataclasses

from temporalio.client import Client

from orchestrator.app.cli.common import BadInput, fail

#: How long the CLI tries to reach Temporal before it says it cannot.
CONNECT_TIMEOUT = 15.0


@dataclasses.dataclass(frozen=True)
class Reached:
    """What trying to reach Temporal gave: a client, or why not (no secret in it)."""

    client: Client | None
    address: str
    why: str = ""
    secrets: tuple[str, ...] = ()
    """What messages about this connection must never show (API key, metadata values)."""


async def try_connect(address: str | None, timeout: float = CONNECT_TIMEOUT) -> Reached:
    """A client of Temporal at ``address`` (and the command's connection flags, profile and
    ``TEMPORAL_*``) within ``timeout``, or none and why; exit 2 naming a bad setting. For
    commands that go on without a server (audit, fleet host) as for those that need one."""
    import asyncio

    from orchestrator.app.cli.connection import options_from_context
    from orchestrator.infra.client import connect_resolved
    from orchestrator.infra.connection import ConnectionError_, redact, resolve

    try:
        conn = resolve(options_from_context(address))
    except ConnectionError_ as err:
        raise BadInput(str(err), field=err.field) from None
    try:
        client = await asyncio.wait_for(connect_resolved(conn), timeout)
    except (RuntimeError, TimeoutError, OSError) as err:
        why = redact(str(err), conn.secrets) or f"no answer within {timeout:g}s"
        return Reached(None, conn.address, why, tuple(conn.secrets))
    return Reached(client, conn.address, secrets=tuple(conn.secrets))


async def connect_or_fail(address: str | None) -> Client:
    """A client of Temporal at ``address``, or exit 2 naming a bad setting, or exit 1 naming
    ``address`` (never a hang), or exit 2 when the server serves another fleet. No message
    carries a secret (API key, gRPC metadata)."""
    reached = await try_connect(address)
    if reached.client is None:
        fail(
            f"address: cannot reach Temporal at {reached.address} ({reached.why}); "
            "is `trainctl server` running?",
            field="address",
        )
    await check_same_fleet(reached.client, reached.address)
    return reached.client


def fleet_task_queue() -> str:
    """The task queue of this fleet's workers: the command's ``--task-queue``, else
    ``TRAINCTL_TASK_QUEUE``, else ``trainctl``."""
    import os

    import click

    from orchestrator.contracts.constants import TASK_QUEUE

    ctx = click.get_current_context(silent=True)
    given = ctx.params.get("task_queue") if ctx is not None else None
    return str(given or os.environ.get(TASK_QUEUE_ENV) or TASK_QUEUE)


#: The environment variable naming the task queue of this fleet's workers.
TASK_QUEUE_ENV = "TRAINCTL_TASK_QUEUE"


async def check_same_fleet(client: Client, address: str) -> None:
    """Exit 2 (field ``address``) when the workers polling this fleet's task queue
    (``fleet_task_queue``) on the server serve another fleet than the one under TRAINCTL_HOME
    (another home's server on the port): steering its trains would steer someone else's fleet.
    Workers announce their fleet in their identity (``fleet.fleet_id``); no worker polling, or
    a fleet without an id, checks nothing. Fleets sharing one server on queues of their own
    pass each other's checks."""
    import asyncio

    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    from orchestrator.fleet import fleet_store
    from orchestrator.fleet.fleet_id import identity_fleet, read_fleet_id

    ours = read_fleet_id(fleet_store())
    if ours is None:
        return
    try:
        desc = await asyncio.wait_for(
            client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=fleet_task_queue()),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            ),
            CONNECT_TIMEOUT,
        )
    except Exception:  # noqa: BLE001 - a server that will not say is not refused for it
        return
    fleets = {identity_fleet(p.identity) for p in desc.pollers} - {None}
    if fleets and ours not in fleets:
        others = ", ".join(sorted(str(f) for f in fleets))
        raise BadInput(
            f"address: the Temporal server at {address} serves another fleet (the workers "
            f"of task queue {fleet_task_queue()} serve fleet {others}; this TRAINCTL_HOME's "
            f"fleet is {ours}): point TEMPORAL_ADDRESS/--address at this fleet's server, or "
            f"{TASK_QUEUE_ENV}/--task-queue at this fleet's queue",
            field="address",
        )
