"""The ``trainctl`` command line: one click group, one module per command family."""

from __future__ import annotations

import click

from orchestrator.cli import audit, demo, fleet, ops, server, simulate, train


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trainctl")
def main() -> None:
    """Maintenance trains and bulk operations for GPU fleets, on Temporal."""


for _module in (fleet, server, train, demo, ops, simulate, audit):
    for _cmd in _module.COMMANDS:
        main.add_command(_cmd)
