"""``trainctl ops``: bulk operations (OpsPlanner) over many hosts at once.

``plan`` is a dry run: it peeks every cluster of the scope (read-only, nothing is written to the
fleet), plans waves and prints them with the impact. A refused plan exits 2 with the reason,
so automation gets a clear yes, no or plan. ``schema`` publishes the spec's JSON Schema.
Execution subcommands (start, status, pause, resume, abort) join this group.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from orchestrator.cli.common import BadInput, emit, fail, handle_errors, json_option
from orchestrator.fleet import SqliteFleet, open_fleet
from orchestrator.ops.spec import OperationSpec, load_spec, resolve_clusters, spec_json_schema
from orchestrator.planning.ops_plan import OperationPlan, holders_in, plan_operation
from orchestrator.planning.ops_snapshot import snapshot_cluster


@click.group("ops")
def ops() -> None:
    """Plan (and run) bulk operations: CUDA/driver upgrades, lower-layer updates, reboots."""


spec_option = click.option(
    "--spec",
    "spec_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Operation spec, YAML or JSON (see `trainctl ops schema`).",
)


def open_fleet_or_fail() -> SqliteFleet:
    try:
        return open_fleet()
    except FileNotFoundError as err:
        fail(str(err))


def plan_spec(fleet: SqliteFleet, spec: OperationSpec) -> OperationPlan:
    """Peek each cluster of the scope (read-only) and plan; ValueError naming ``scope``."""
    names = resolve_clusters(spec.scope, fleet.cluster_names())
    snaps = {name: snapshot_cluster(fleet.peek(name)) for name in names}
    return plan_operation(spec, snaps, holders_in(snaps.values()))


@ops.command("plan")
@spec_option
@json_option
@handle_errors
def plan(spec_path: Path, as_json: bool) -> None:
    """Dry run: waves, impact and estimated duration; changes nothing in the fleet."""
    spec = load_spec(spec_path)
    fleet = open_fleet_or_fail()
    try:
        result = plan_spec(fleet, spec)
    finally:
        fleet.close()
    if as_json or not result.refused:
        emit(result.model_dump(mode="json"), as_json, lambda _: click.echo(result.summary()))
    if result.refused:
        raise BadInput(f"refused: {result.refused}")


@ops.command("schema")
def schema() -> None:
    """Print the JSON Schema of an operation spec."""
    sys.stdout.write(json.dumps(spec_json_schema(), indent=2) + "\n")


COMMANDS = [ops]
