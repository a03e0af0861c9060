"""One example per command, shown at the end of its ``--help`` and in the CLI reference.

Kept in one table so the examples read as a set (the same cluster, spec files and ids
throughout) and a test can check every command has one that parses. :func:`add_examples`
sets each command's click epilog from the table.
"""

from __future__ import annotations

import click

#: command path (without ``trainctl``) -> one command line a user could run.
EXAMPLES: dict[str, str] = {
    "": "trainctl demo --preset small",
    "audit": "trainctl audit --cluster c00",
    "report": "trainctl report --since 7d --cluster c00 --json",
    "campaign": "trainctl campaign plan --spec examples/campaign.yaml",
    "campaign abort": "trainctl campaign abort --id os-6-8-0-50 --reason 'canary failed'",
    "campaign pause": "trainctl campaign pause --id os-6-8-0-50 --reason 'freeze'",
    "campaign approve": "trainctl campaign approve --id os-6-8-0-50-approved "
    "--stage first-cluster --gate before --reason 'change board'",
    "campaign plan": "trainctl campaign plan --spec examples/campaign.yaml",
    "campaign resume": "trainctl campaign resume --id os-6-8-0-50 --reason 'cleared'",
    "campaign start": "trainctl campaign start --spec examples/campaign.yaml --wait",
    "campaign status": "trainctl campaign status --id os-6-8-0-50 --json",
    "completion": "trainctl completion bash > ~/.local/share/bash-completion/completions/trainctl",
    "demo": "trainctl demo --preset small --port 7233 --ui-port 8233",
    "fleet": "trainctl fleet status --cluster c00",
    "fleet host": "trainctl fleet host --behind --cluster c00",
    "fleet init": "trainctl fleet init --preset multi --speed 3600",
    "fleet inject-fault": (
        "trainctl fleet inject-fault --cluster c00 --component os --version 6.12.0-bad --rate 1.0"
    ),
    "fleet migrate": "trainctl fleet migrate --to postgresql://trainctl@db:5432/trainctl",
    "fleet status": "trainctl fleet status --cluster c00 --json",
    "lab": "trainctl lab slurm up --nodes 8",
    "lab slurm": "trainctl lab slurm up --nodes 8",
    "lab slurm down": "trainctl lab slurm down",
    "lab slurm up": "trainctl lab slurm up --nodes 8 --racks 2",
    "ops": "trainctl ops plan --spec examples/cuda.yaml",
    "ops abort": "trainctl ops abort --id ops-cuda-12-6-c00 --reason 'driver regression'",
    "ops pause": "trainctl ops pause --id ops-cuda-12-6-c00",
    "ops approve": "trainctl ops approve --id ops-cuda-12-6-c00 --approver oncall",
    "ops plan": "trainctl ops plan --spec examples/cuda.yaml --json",
    "ops resume": "trainctl ops resume --id ops-cuda-12-6-c00",
    "ops schema": "trainctl ops schema > operation.schema.json",
    "ops start": "trainctl ops start --spec examples/cuda.yaml --wait",
    "ops status": "trainctl ops status --id ops-cuda-12-6-c00",
    "schedule": "trainctl schedule list",
    "schedule delete": "trainctl schedule delete --id ops-cuda-12-6-c00",
    "schedule list": "trainctl schedule list --json",
    "schedule pause": "trainctl schedule pause --id ops-cuda-12-6-c00",
    "schedule resume": "trainctl schedule resume --id ops-cuda-12-6-c00",
    "schedule trigger": "trainctl schedule trigger --id ops-cuda-12-6-c00",
    "schema": "trainctl schema train --check examples/train.yaml",
    "server": "trainctl server --port 7233 --ui-port 8233",
    "simulate": "trainctl simulate --preset small --days 30 --json",
    "train": "trainctl train status --cluster c00",
    "train pause": "trainctl train pause --cluster c00 --reason 'incident'",
    "train reconfigure": "trainctl train reconfigure --cluster c00 --domain-size 16",
    "train resume": "trainctl train resume --cluster c00 --reason 'fixed'",
    "train start": "trainctl train start --spec examples/train.yaml",
    "train status": "trainctl train status --cluster c00 --json",
    "train stop": "trainctl train stop --cluster c00",
    "versions": "trainctl versions list",
    "breaker": "trainctl breaker status --cluster c00",
    "breaker status": "trainctl breaker status --cluster c00 --json",
    "breaker reset": "trainctl breaker reset --cluster c00 --reason 'bad PDU replaced'",
    "versions clear": "trainctl versions clear os=6.12.0-bad --reason 'vendor fix verified'",
    "versions list": "trainctl versions list --all --json",
    "versions mark": "trainctl versions mark os=6.12.0-bad --reason 'canary failed'",
    "worker": "trainctl worker --metrics-port 9464",
}


def walk(command: click.Command, path: str = "") -> list[tuple[str, click.Command]]:
    """``(path, command)`` for ``command`` and every command under it, depth first."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            found += walk(command.commands[name], f"{path} {name}".strip())
    return found


def add_examples(root: click.Command) -> None:
    """Set each command's epilog to its example (``\\b`` keeps click from rewrapping it)."""
    for path, command in walk(root):
        example = EXAMPLES.get(path)
        if example is not None:
            command.epilog = f"\b\nExample:\n  {example}"
