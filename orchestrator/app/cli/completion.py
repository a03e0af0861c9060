"""``trainctl completion bash|zsh|fish``: print click's shell completion script for trainctl.

The script calls ``trainctl`` back with ``_TRAINCTL_COMPLETE`` set; click answers with the
commands, options and choices that fit what is typed so far.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from orchestrator.app.cli.common import emit, json_option

SHELLS = ("bash", "zsh", "fish")
PROG = "trainctl"
COMPLETE_VAR = "_TRAINCTL_COMPLETE"


def completion_script(root: click.Command, shell: str) -> str:
    """The completion script of ``shell`` for ``root`` run as ``trainctl``."""
    cls = get_completion_class(shell)
    if cls is None:  # click.Choice keeps other shells out; this guards the table above
        raise click.BadParameter(f"no completion for {shell!r}", param_hint="shell")
    return cls(root, {}, PROG, COMPLETE_VAR).source()


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@json_option
@click.pass_context
def completion(ctx: click.Context, shell: str, as_json: bool) -> None:
    """Print the shell completion script (source it from your shell's startup file)."""
    script = completion_script(ctx.find_root().command, shell)
    emit({"shell": shell, "script": script}, as_json, lambda _: click.echo(script))


COMMANDS = [completion]
