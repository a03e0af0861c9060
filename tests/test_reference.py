"""The generated references: spec schemas equal to the models and validating every shipped
example, reference pages up to date, shell completion, and one example in every ``--help``."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import click
import jsonschema  # in the test extra: a missing one fails, never skips
import yaml
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.cli.examples import EXAMPLES, walk
from orchestrator.app.cli.schema import SPEC_MODELS

ROOT = Path(__file__).resolve().parents[1]
#: every file under examples/ -> the kind of spec it is (a new example needs a line here).
EXAMPLE_KINDS = {
    "train.yaml": "train",
    "cuda.yaml": "operation",
    "campaign.yaml": "campaign",
    "bad-campaign.yaml": "campaign",
    "approved-campaign.yaml": "campaign",
    "slurm-config.yaml": "slurm-config",
    "train-pacific.yaml": "train",
    "lower-layer-batches.yaml": "operation",
}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from orchestrator.app.cli import entrypoint; entrypoint()", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
        timeout=120,
    )


def test_shipped_schemas_match_the_models_and_every_example_validates() -> None:
    """``trainctl schema KIND`` prints docs/schemas/KIND.json; each shipped example validates
    against its schema, and the same example with an unknown field does not."""
    runner = CliRunner()
    for kind in SPEC_MODELS:
        printed = json.loads(runner.invoke(main, ["schema", kind]).stdout)
        shipped = json.loads((ROOT / "docs" / "schemas" / f"{kind}.json").read_text())
        assert printed == shipped, kind
        jsonschema.Draft202012Validator.check_schema(shipped)
        assert shipped["additionalProperties"] is False, kind
    ops = json.loads(runner.invoke(main, ["ops", "schema"]).stdout)
    assert ops == json.loads((ROOT / "docs" / "schemas" / "operation.json").read_text())
    assert sorted(p.name for p in (ROOT / "examples").iterdir()) == sorted(EXAMPLE_KINDS)
    for name, kind in EXAMPLE_KINDS.items():
        schema = json.loads((ROOT / "docs" / "schemas" / f"{kind}.json").read_text())
        spec = yaml.safe_load((ROOT / "examples" / name).read_text())
        jsonschema.validate(spec, schema)
        bad = jsonschema.Draft202012Validator(schema).iter_errors({**spec, "domain_sise": 4})
        assert any("domain_sise" in e.message for e in bad), name


def test_schema_check_accepts_the_example_and_refuses_an_unknown_field(tmp_path: Path) -> None:
    """``trainctl schema train --check`` passes examples/train.yaml and refuses a typo'd field
    with exit 2 naming it, one JSON object under --json."""
    ok = _run("schema", "train", "--check", "examples/train.yaml")
    assert ok.returncode == 0 and "valid train spec" in ok.stdout, ok.stderr
    bad = tmp_path / "train.yaml"
    bad.write_text((ROOT / "examples" / "train.yaml").read_text() + "domain_sise: 4\n")
    out = _run("schema", "train", "--check", str(bad), "--json")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert json.loads(out.stdout)["field"] == "domain_sise"


def test_generated_reference_pages_are_up_to_date() -> None:
    """``scripts/gen_docs.py --check``: schemas, spec pages and the CLI reference match the code."""
    out = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for path, _ in walk(main):
        assert f"## trainctl {path}".rstrip() + "\n" in cli, path


def test_completion_prints_a_script_for_each_shell() -> None:
    """``trainctl completion bash`` prints click's script wired to trainctl; zsh and fish too."""
    out = _run("completion", "bash")
    assert out.returncode == 0 and "_TRAINCTL_COMPLETE=bash_complete" in out.stdout
    assert "complete -o nosort -F _trainctl_completion trainctl" in out.stdout
    for shell in ("zsh", "fish"):
        assert "trainctl" in CliRunner().invoke(main, ["completion", shell]).stdout, shell


def test_every_command_help_ends_with_an_example_that_parses() -> None:
    """Each command's --help ends with ``Example:`` and a trainctl command line whose options
    parse against that command; the examples table names no command that does not exist."""
    runner = CliRunner()
    commands = dict(walk(main))
    assert set(EXAMPLES) <= set(commands)
    for path in commands:
        result = runner.invoke(main, [*path.split(), "--help"])
        tail = result.stdout.rstrip().splitlines()[-2:]
        assert result.exit_code == 0 and tail[0].strip() == "Example:", path
        assert tail[1].strip() == EXAMPLES[path], path
        _parses(EXAMPLES[path])


def _parses(example: str) -> None:
    """``example`` names a command and options click accepts (nothing runs)."""
    words = shlex.split(example.split(" > ")[0])
    assert words[0] == "trainctl", example
    command: click.Command = main
    args = words[1:]
    parent = click.Context(main, info_name="trainctl")
    while isinstance(command, click.Group) and args and args[0] in command.commands:
        command = command.commands[args[0]]
        parent = click.Context(command, info_name=args[0], parent=parent)
        args = args[1:]
    command.make_context(command.name or "", args, parent=parent.parent)
