"""``trainctl campaign approve`` and ``trainctl ops approve``: sign off a waiting approval gate.

The approver is the OS user unless ``--approver`` names someone else; the Temporal client's
identity goes with it into the gate's record. Both are a record of who said yes, not an
authentication: only the connection's own credentials (an API key, an mTLS identity) are
checked by the server. An approver the spec does not list is refused (exit 2, ``approver``).
"""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path
from typing import Any

import click

from orchestrator.app.cli.common import BadInput, emit, handle_errors, json_option, reason_option
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import connect_or_fail
from orchestrator.campaign.client import approve_campaign, resolve_id
from orchestrator.contracts.approvals import ApprovalGate, GateName, approval_request
from orchestrator.contracts.campaign_spec import load_campaign_spec
from orchestrator.ops.client import approve_operation

approver_option = click.option(
    "--approver",
    default=None,
    help="Who approves (default: the OS user); must be one of the gate's approvers.",
)


def _approver(given: str | None) -> str:
    """``--approver``, else the OS user; a name that cannot be one is refused here, before
    anything connects."""
    if given is None:
        try:
            given = getpass.getuser()
        except (KeyError, OSError):
            raise BadInput("approver: no OS user name; give --approver", field="approver") from None
    _request(given, "", "", "before", "")
    return given


def _print_gate(obj: dict[str, Any]) -> None:
    where = f"stage {obj['stage']} ({obj['gate']})" if obj["stage"] else "the start"
    click.echo(
        f"approved {where} by {obj['approver']} (client identity {obj['identity'] or '-'})"
        + (f": {obj['reason']}" if obj["reason"] else "")
    )


@click.command("approve")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), default=None)
@click.option("--id", "campaign_id", default=None, help="campaign-<name> (or the name).")
@click.option("--stage", required=True, help="The stage whose gate waits.")
@click.option("--gate", type=click.Choice(["before", "after"]), default="before", show_default=True)
@approver_option
@reason_option
@connection_options
@json_option
@handle_errors
def campaign_approve(
    spec_path: Path | None,
    campaign_id: str | None,
    stage: str,
    gate: GateName,
    approver: str | None,
    reason: str,
    address: str | None,
    as_json: bool,
) -> None:
    """Approve a campaign's gate before or after a stage."""
    if campaign_id is None and spec_path is None:
        raise BadInput("id: give --id or --spec", field="id")
    cid = resolve_id(campaign_id) if campaign_id else load_campaign_spec(spec_path).workflow_id  # type: ignore[arg-type]
    who = _approver(approver)

    async def go() -> ApprovalGate:
        client = await connect_or_fail(address)
        req = _request(who, client.identity, stage, gate, reason)
        return await approve_campaign(client, cid, req)

    emit(asyncio.run(go()).model_dump(mode="json"), as_json, _print_gate)


@click.command("approve")
@click.option("--id", "op_id", required=True, help="Operation id, ops-<request_id>.")
@approver_option
@reason_option
@connection_options
@json_option
@handle_errors
def ops_approve(
    op_id: str, approver: str | None, reason: str, address: str | None, as_json: bool
) -> None:
    """Approve an operation's gate before its start."""
    who = _approver(approver)

    async def go() -> ApprovalGate:
        client = await connect_or_fail(address)
        return await approve_operation(
            client, op_id, _request(who, client.identity, "", "before", reason)
        )

    emit(asyncio.run(go()).model_dump(mode="json"), as_json, _print_gate)


def _request(who: str, identity: str, stage: str, gate: GateName, reason: str) -> Any:
    try:
        return approval_request(who, identity, stage, gate, reason)
    except ValueError as err:
        raise BadInput(str(err), field="approver") from None
