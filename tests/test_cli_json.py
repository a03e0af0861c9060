"""Every command speaks ``--json``: one JSON object on stdout on success and on error (issue 15).

The error cases form a table with one entry per command of the CLI, and a test checks the table
covers them all, so a new command cannot ship without its error path under ``--json`` being
tried. Each entry is a realistic mistake (a missing spec, an unknown preset, a bad pair, a
server that is not there); the answer must be exactly one line on stdout holding one object
``{"error", "field", "exit_code"}`` whose exit code is the process's (1 or 2), never a traceback.
The success cases are every command that finishes without a server; commands that need one are
covered with ``--json`` by the end-to-end tests (train, ops, campaign, schedule, versions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from orchestrator.app.cli import main

#: A Temporal frontend nobody listens on: commands that need a server fail fast (exit 1).
NOWHERE = ("--address", "127.0.0.1:1")
MISSING = "/nonexistent/spec.yaml"

ERRORS: dict[str, tuple[str, ...]] = {
    "audit": (),  # no fleet
    "breaker reset": ("--cluster", "c99", *NOWHERE),  # no fleet
    "breaker status": ("--cluster", "c99"),  # no fleet
    "campaign abort": ("--id", "nope", *NOWHERE),
    "campaign approve": ("--id", "nope", "--stage", "s", "--approver", " ", *NOWHERE),
    "campaign pause": ("--id", "nope", *NOWHERE),
    "campaign resume": ("--id", "nope", *NOWHERE),
    "campaign status": ("--id", "nope", *NOWHERE),
    "campaign plan": ("--spec", MISSING),
    "campaign start": ("--spec", MISSING),
    "completion": ("tcsh",),  # not a shell click completes
    "demo": ("--preset", "nope"),
    "fleet init": ("--preset", "nope"),
    "fleet inject-fault": ("--cluster", "c00", "--component", "kernel", "--version", "1"),
    "fleet migrate": ("--to", "postgresql://ops:hunter2@127.0.0.1:5432/fleet"),  # a password
    "fleet status": (),  # no fleet
    "fleet host": ("--behind", "c00-z00-r000-h00"),  # a host or --behind, not both
    "lab slurm up": ("--nodes", "0"),
    "lab slurm down": ("--bogus",),  # stopping nothing succeeds: only the command line is wrong
    "ops abort": ("--id", "ops-nope", *NOWHERE),
    "ops pause": ("--id", "ops-nope", *NOWHERE),
    "ops resume": ("--id", "ops-nope", *NOWHERE),
    "ops status": ("--id", "ops-nope", *NOWHERE),
    "ops plan": ("--spec", MISSING),
    "ops start": ("--spec", MISSING),
    "ops schema": ("--bogus",),  # nothing to get wrong but the command line itself
    "report": ("--since", "soon"),
    "schedule delete": ("--id", "nope", *NOWHERE),
    "schedule list": NOWHERE,
    "schedule pause": ("--id", "nope", *NOWHERE),
    "schedule resume": ("--id", "nope", *NOWHERE),
    "schedule trigger": ("--id", "nope", *NOWHERE),
    "schema": ("train", "--check", MISSING),
    "server": ("--port", "7300", "--ui-port", "7300"),
    "simulate": ("--preset", "nope"),
    "train pause": ("--cluster", "c00", *NOWHERE),
    "train reconfigure": ("--cluster", "c00", "--domain-size", "0"),
    "train resume": ("--cluster", "c00", *NOWHERE),
    "train start": ("--spec", MISSING),
    "train status": ("--cluster", "c00", *NOWHERE),
    "train stop": ("--cluster", "c00", *NOWHERE),
    "ops approve": ("--id", "nope", "--approver", "", *NOWHERE),
    "versions clear": ("not-a-pair", "--reason", "test"),
    "versions list": (),  # no fleet
    "versions mark": ("not-a-pair", "--reason", "test"),
    "worker": ("--metrics-port", "0", "--log-format", "json"),  # no fleet
}


def commands(group: click.Group = main, prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += commands(cmd, f"{prefix}{name} ")
        else:
            out.append(prefix + name)
    return out


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def one_object(result: Result) -> dict[str, Any]:
    """stdout is exactly one line holding one JSON object; no traceback anywhere."""
    assert "Traceback" not in result.output, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    obj = json.loads(lines[0])
    assert isinstance(obj, dict), obj
    return obj


def test_every_command_has_an_error_case() -> None:
    """The table below names every command of the CLI, and nothing else."""
    assert sorted(ERRORS) == commands()


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_under_json_is_one_object(name: str, tmp_home: Path) -> None:
    """A mistake under --json answers with one error object whose exit code is the process's."""
    result = run(*name.split(), *ERRORS[name], "--json")
    err = one_object(result)
    assert set(err) >= {"error", "field", "exit_code"}, err
    assert result.exit_code == err["exit_code"] in (1, 2), (result.exit_code, err)
    assert err["error"] and "\n" not in err["error"], err


def test_success_under_json_is_one_object(tmp_home: Path, tmp_path: Path) -> None:
    """Commands that finish without a server print one object on success (schema included)."""
    ok = [
        ("fleet", "init", "--preset", "small", "--seed", "1"),
        ("fleet", "status"),
        ("fleet", "inject-fault", "--cluster", "c00", "--component", "os", "--version", "6.9"),
        ("audit",),
        ("ops", "schema"),
        ("schema", "campaign"),
        ("schema", "train", "--check", "examples/train.yaml"),
        ("completion", "bash"),
        ("ops", "plan", "--spec", "examples/cuda.yaml"),
        ("campaign", "plan", "--spec", "examples/campaign.yaml"),
        ("simulate", "--preset", "small", "--days", "1"),
        ("lab", "slurm", "down"),
    ]
    for args in ok:
        result = run(*args, "--json")
        assert result.exit_code == 0, (args, result.output)
        assert "error" not in one_object(result), args
