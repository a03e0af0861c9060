"""``trainctl versions list|mark|clear``: versions known to be bad, fleet-wide.

A bad version is refused as a target by every train, operation and campaign until an operator
clears it (``orchestrator.planning.version_policy``). Blame marks the version it names; an
operator may mark one by hand (a vendor advisory) and clears it once fixed, with a reason.
"""

from __future__ import annotations

import getpass
from typing import Any

import click

from orchestrator.app.cli.common import (
    MAX_REASON,
    BadInput,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
)
from orchestrator.fleet.bad_versions import clear_bad, list_bad, mark_bad, parse_pair


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _pair(text: str) -> tuple[str, str]:
    try:
        return parse_pair(text)
    except ValueError as err:
        raise BadInput(str(err), field="version") from None


def _reason(reason: str) -> str:
    """One line of at most MAX_REASON characters (it is shown in every refusal it causes)."""
    if not reason.strip():
        raise BadInput("reason: say why (it is shown to whoever meets the refusal)")
    if "\n" in reason.strip() or "\r" in reason.strip():
        raise BadInput("reason: one line, no newlines", field="reason")
    if len(reason.strip()) > MAX_REASON:
        raise BadInput(
            f"reason: at most {MAX_REASON} characters (got {len(reason.strip()):,})",
            field="reason",
        )
    return reason.strip()


def _print_list(o: dict[str, Any]) -> None:
    rows = o["bad_versions"]
    if not rows:
        click.echo("no version is marked bad")
        return
    for e in rows:
        line = f"{e['component']}={e['version']}: {e['reason']} (marked by {e['marked_by']}"
        line += f" at {e['marked_at']})"
        if e.get("cleared_at"):
            line += f"; cleared by {e['cleared_by']}: {e['cleared_reason']}"
        click.echo(line)


@click.group("versions")
def versions() -> None:
    """Versions known to be bad: refused as targets until cleared."""


@versions.command("list")
@click.option("--all", "include_cleared", is_flag=True, help="Also the cleared ones.")
@json_option
@handle_errors
def list_cmd(include_cleared: bool, as_json: bool) -> None:
    """The versions marked bad, with why and who."""
    fleet = open_fleet_or_fail(read_only=True)
    try:
        rows = list_bad(fleet, include_cleared)
    finally:
        fleet.close()
    emit({"bad_versions": [e.model_dump(mode="json") for e in rows]}, as_json, _print_list)


@versions.command("mark")
@click.argument("pair", metavar="COMPONENT=VERSION")
@click.option("--reason", required=True, help="Why it is bad (a ticket, an advisory).")
@json_option
@handle_errors
def mark_cmd(pair: str, reason: str, as_json: bool) -> None:
    """Mark a version bad fleet-wide: no train, operation or campaign may install it."""
    comp, version = _pair(pair)
    why = _reason(reason)
    fleet = open_fleet_or_fail()
    try:
        entry, new = mark_bad(fleet, comp, version, why, _who())
    finally:
        fleet.close()
    out = {**entry.model_dump(mode="json"), "newly_marked": new}
    emit(out, as_json, lambda o: click.echo(f"{comp}={version} marked bad: {o['reason']}"))


@versions.command("clear")
@click.argument("pair", metavar="COMPONENT=VERSION")
@click.option("--reason", required=True, help="Why it may be installed again.")
@json_option
@handle_errors
def clear_cmd(pair: str, reason: str, as_json: bool) -> None:
    """Clear a bad version: trains, operations and campaigns may target it again."""
    comp, version = _pair(pair)
    why = _reason(reason)
    fleet = open_fleet_or_fail()
    try:
        try:
            entry = clear_bad(fleet, comp, version, why, _who())
        except LookupError as err:
            raise BadInput(str(err), field="version") from None
    finally:
        fleet.close()
    emit(entry.model_dump(mode="json"), as_json, lambda o: click.echo(f"{comp}={version} cleared"))


COMMANDS = [versions]
