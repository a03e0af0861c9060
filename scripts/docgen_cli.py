"""The CLI reference page, from the click commands: usage, help, options, the example.

The Temporal connection options every command that talks to a server shares are listed once,
at the top, and each such command links to them.
"""

from __future__ import annotations

import inspect

import click

from orchestrator.app.cli.examples import EXAMPLES, walk

CONNECTION = "temporal-connection-options"


def _connection_options() -> list[click.Option]:
    from orchestrator.app.cli.connection import connection_options

    probe = click.command("probe")(connection_options(lambda **_: None))
    return [p for p in probe.params if isinstance(p, click.Option)]


def _help_text(text: str | None) -> str:
    """Click help as Markdown: ``\\b`` markers dropped, ``<`` outside code escaped."""
    from docgen_specs import md

    lines = [ln for ln in inspect.cleandoc(text or "").splitlines() if ln.strip() != "\b"]
    return md("\n".join(lines).strip())


def _option_line(opt: click.Parameter) -> str:
    names = ", ".join(f"`{n}`" for n in (*opt.opts, *opt.secondary_opts))
    if isinstance(opt, click.Argument):
        return f"- {names} (argument{', required' if opt.required else ''})"
    assert isinstance(opt, click.Option)
    kind = "" if opt.is_flag else f" `{opt.make_metavar(click.Context(click.Command('x')))}`"
    extra = ", required" if opt.required else ""
    if opt.multiple:
        extra += ", repeatable"
    help_text = " ".join(_help_text(opt.help).split())
    return f"- {names}{kind}{f' ({extra[2:]})' if extra else ''}" + (
        f": {help_text}" if help_text else ""
    )


def command_section(path: str, command: click.Command, shared: set[str]) -> list[str]:
    """One command: heading, help, usage, arguments and options, example."""
    title = f"trainctl {path}".strip()
    ctx = click.Context(command, info_name=title)
    out = [f"## {title}", "", _help_text(command.help), ""]
    out += ["```text", f"Usage: {title} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
    params = [p for p in command.params if p.name not in shared and p.name != "help"]
    if isinstance(command, click.Group):
        subs = ", ".join(f"`{n}`" for n in sorted(command.commands))
        out += [f"Commands: {subs}.", ""]
    out += [_option_line(p) for p in params if not getattr(p, "hidden", False)]
    if any(p.name in shared for p in command.params):
        out.append(f"- and the [Temporal connection options](#{CONNECTION})")
    if params or any(p.name in shared for p in command.params):
        out.append("")
    if path in EXAMPLES:
        out += ["Example:", "", "```bash", EXAMPLES[path], "```", ""]
    return out


def cli_page(root: click.Command) -> str:
    """The whole reference: every command, depth first, after the shared options."""
    shared_opts = _connection_options()
    shared = {p.name for p in shared_opts if p.name != "as_json"}
    out = [
        "# CLI reference",
        "",
        "Generated from the click commands by `scripts/gen_docs.py`; do not edit by hand.",
        "Every command takes `-h`/`--help`; `--json` prints one JSON object on stdout.",
        "",
        "## Temporal connection options",
        "",
        "Commands that talk to the Temporal server take these (defaults from the Temporal",
        "environment configuration: `$TEMPORAL_PROFILE`, `$TEMPORAL_CONFIG_FILE`).",
        "",
    ]
    out += [_option_line(p) for p in shared_opts if p.name in shared] + [""]
    for path, command in walk(root):
        out += command_section(path, command, shared)
    return "\n".join(out).rstrip() + "\n"
