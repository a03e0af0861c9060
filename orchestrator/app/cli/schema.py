"""``trainctl schema KIND``: the JSON Schema of each spec a user writes, from its pydantic model.

Four kinds: ``train`` (``train start --spec``), ``operation`` (``ops start --spec``; ``ops
schema`` prints the same), ``campaign`` (``campaign start --spec``) and ``slurm-config``
(``fleet init --backend-config``). The same schemas ship under ``docs/schemas/`` for editors and
automation clients (``scripts/gen_docs.py`` writes them; a test keeps them equal to the models).
Every model forbids unknown fields, so each schema says ``additionalProperties: false`` and a
typo is refused by an editor as it is by trainctl. ``--check FILE`` reads a spec through
trainctl's own loader (the schema cannot say everything: a budget's two limits compared, a
stage name used twice) and exits 2 naming the field at fault.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from orchestrator.app.cli.common import emit, handle_errors, json_option
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.ops_spec import OperationSpec, spec_json_schema
from orchestrator.contracts.specs import load_spec
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.fleet.slurm.config import SlurmBackendConfig

#: kind -> (model, what a loader's error calls it).
SPEC_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "train": (TrainSpec, "train spec"),
    "operation": (OperationSpec, "operation spec"),
    "campaign": (CampaignSpec, "campaign spec"),
    "slurm-config": (SlurmBackendConfig, "backend config"),
}

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def spec_schema(kind: str) -> dict[str, Any]:
    """The published JSON Schema (draft 2020-12) of the spec ``kind``, as a user writes it."""
    if kind == "operation":
        return spec_json_schema()
    model, _ = SPEC_MODELS[kind]
    return {"$schema": DRAFT, **model.model_json_schema(by_alias=True)}


@click.command("schema")
@click.argument("kind", type=click.Choice(list(SPEC_MODELS)))
@click.option(
    "--check",
    "check_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Validate this spec file (YAML or JSON) instead of printing the schema.",
)
@json_option
@handle_errors
def schema(kind: str, check_path: Path | None, as_json: bool) -> None:
    """Print the JSON Schema of a spec (indented; one line under --json), or check a file."""
    if check_path is None:
        sys.stdout.write(json.dumps(spec_schema(kind), indent=None if as_json else 2) + "\n")
        return
    model, what = SPEC_MODELS[kind]
    load_spec(check_path, model, what=what)
    emit(
        {"path": str(check_path), "kind": kind, "valid": True},
        as_json,
        lambda _: click.echo(f"{check_path}: a valid {what}"),
    )


COMMANDS = [schema]
