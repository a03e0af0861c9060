"""The ``trainctl`` command line: one click group, one module per command family."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trainctl")
def main() -> None:
    """Maintenance trains and bulk operations for GPU fleets, on Temporal."""


def _register() -> None:
    import importlib

    for module in ("fleet", "audit", "server", "worker", "train", "demo", "ops", "simulate"):
        try:
            mod = importlib.import_module(f"orchestrator.cli.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"orchestrator.cli.{module}":
                raise
            continue
        for cmd in getattr(mod, "COMMANDS", []):
            main.add_command(cmd)


_register()
