"""``trainctl breaker status|reset --cluster C``: each cluster's circuit breaker.

``status`` reads the store (no server needed): open or closed, the failures in its window and
the limit, why it opened, what it paused, the last reset. ``reset`` resumes exactly what the
breaker paused and closes it, recording who (the OS user, or ``--by``) and why; the failures
recorded so far are forgiven, so only new ones open it again. The worker opens breakers
(``orchestrator.app.breaker_watch``).
"""

from __future__ import annotations

import asyncio
import getpass
from typing import Any

import click

from orchestrator.app.breaker_watch import breaker_views, reset_breaker
from orchestrator.app.cli.common import (
    BadInput,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
    reason_option,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.contracts.breaker_types import BreakerView
from orchestrator.contracts.ui_text import duration, plural

cluster_option = click.option("--cluster", required=True, help="The cluster.")


@click.group()
def breaker() -> None:
    """Each cluster's circuit breaker over its trains and operations."""


def _cluster(cluster: str) -> Any:
    """The fleet's store, once ``cluster`` is known to be one of its clusters (else exit 2)."""
    from orchestrator.fleet import fleet_store

    fleet = open_fleet_or_fail(read_only=True)
    try:
        names = fleet.cluster_names()
    finally:
        fleet.close()
    if cluster not in names:
        raise BadInput(f"cluster: unknown cluster {cluster[:60]!r}", field="cluster")
    return fleet_store()


def _print(obj: dict[str, Any]) -> None:
    click.echo(
        f"{obj['cluster']}: breaker {obj['state']}; "
        f"{plural(obj['failures_in_window'], 'failure')} within "
        f"{duration(obj['window_hours'])} of fleet time (at most {obj['max_failures']} tolerated)"
    )
    if obj["state"] == "open":
        click.echo(f"  opened {obj['opened_at']}: {obj['reason']}")
        click.echo(f"  paused: {', '.join(obj['paused']) or 'nothing'}")
        click.echo(f"  reset with: trainctl breaker reset --cluster {obj['cluster']} --reason ...")
    if last := obj.get("last_reset"):
        click.echo(
            f"  last reset {last['at']} by {last['who']}: {last['reason'] or '-'} "
            f"(resumed: {', '.join(last['resumed']) or 'nothing'})"
        )


@breaker.command("status")
@cluster_option
@json_option
@handle_errors
def status(cluster: str, as_json: bool) -> None:
    """Open or closed, the failures in its window, what it paused, the last reset."""
    ref = _cluster(cluster)
    (view,) = breaker_views(ref, cluster)
    emit(view.model_dump(mode="json"), as_json, _print)


@breaker.command("reset")
@cluster_option
@reason_option
@click.option("--by", "who", default=None, help="Who resets (default: the OS user).")
@connection_options
@json_option
@handle_errors
def reset(cluster: str, reason: str, who: str | None, address: str | None, as_json: bool) -> None:
    """Resume exactly what the breaker paused and close it (who and why are recorded)."""
    ref = _cluster(cluster)
    if who is None:
        try:
            who = getpass.getuser()
        except (KeyError, OSError):
            raise BadInput("by: no OS user name; give --by", field="by") from None

    async def go() -> BreakerView:
        client = await connect_or_fail(address)
        return await reset_breaker(client, ref, cluster, who, reason)

    emit(asyncio.run(go()).model_dump(mode="json"), as_json, _print)


COMMANDS = [breaker]
