"""The ``trainctl`` command line: one click group, one module per command family."""

from __future__ import annotations

import os
import sys

import click

from orchestrator.app.cli import (
    audit,
    breaker,
    campaign,
    completion,
    demo,
    fleet,
    lab,
    ops,
    report,
    server,
    simulate,
    train,
)
from orchestrator.app.cli import schedule as schedule_cli
from orchestrator.app.cli import schema as schema_cli
from orchestrator.app.cli import versions as versions_cli
from orchestrator.app.cli.common import TrainctlGroup
from orchestrator.app.cli.examples import add_examples


@click.group(cls=TrainctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trainctl")
def main() -> None:
    """Maintenance trains and bulk operations for GPU fleets, on Temporal."""


for _module in (
    fleet,
    server,
    train,
    demo,
    ops,
    campaign,
    simulate,
    audit,
    report,
    lab,
    schedule_cli,
    schema_cli,
    versions_cli,
    breaker,
    completion,
):
    for _cmd in _module.COMMANDS:
        main.add_command(_cmd)
add_examples(main)


def entrypoint() -> None:
    """The console script: run the CLI, then leave without interpreter finalisation.

    The Temporal SDK's native threads can abort a finalising interpreter after our output is
    written (temporalio/sdk-python#300); flushing and ``os._exit`` keeps exit codes reliable.
    """
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
