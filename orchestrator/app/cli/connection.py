"""The connection flags every command that talks to Temporal takes, in one decorator.

``--address`` stays a parameter of each command (their signatures predate profiles); the other
flags (``--namespace``, ``--profile``, ``--config-file``, ``--tls/--no-tls``, ``--tls-ca``,
``--tls-cert``, ``--tls-key``, ``--tls-server-name``, ``--api-key-file``) are kept in the click
context, where :func:`options_from_context` finds them when the command connects. Anything left
out comes from the ``temporalio.envconfig`` profile and ``TEMPORAL_*`` (see
:mod:`orchestrator.infra.connection`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from orchestrator.infra.connection import ConnectionOptions

F = TypeVar("F", bound=Callable[..., Any])

_META = "trainctl.connection"


def _keep(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None and param.name:
        ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def _flag(*decls: str, help: str, **kw: Any) -> Callable[[F], F]:
    return click.option(*decls, default=None, expose_value=False, callback=_keep, help=help, **kw)


_FILE = click.Path(path_type=Path, dir_okay=False)


def connection_options(fn: F) -> F:
    """``--address`` (passed to the command) and the other connection flags (kept aside)."""
    decorators = [
        click.option(
            "--address",
            default=None,
            help="Temporal frontend host:port (default: profile, $TEMPORAL_ADDRESS, "
            "localhost:7233).",
        ),
        _flag("--namespace", help="Temporal namespace (default: profile, $TEMPORAL_NAMESPACE)."),
        _flag("--profile", help="envconfig profile (default $TEMPORAL_PROFILE, else 'default')."),
        _flag(
            "--config-file",
            type=_FILE,
            help="envconfig TOML file (default $TEMPORAL_CONFIG_FILE, "
            "~/.config/temporalio/temporal.toml).",
        ),
        _flag("--tls/--no-tls", help="Force TLS on or off (default: profile, $TEMPORAL_TLS)."),
        _flag("--tls-ca", type=_FILE, help="CA certificate (PEM) the server's must chain to."),
        _flag("--tls-cert", type=_FILE, help="Client certificate (PEM) for mTLS."),
        _flag("--tls-key", type=_FILE, help="Client private key (PEM) for mTLS."),
        _flag("--tls-server-name", help="Server name to verify (SNI) if not the address's."),
        _flag(
            "--api-key-file",
            type=_FILE,
            help="File holding the API key (or $TEMPORAL_API_KEY, or the profile's api_key).",
        ),
    ]
    for deco in reversed(decorators):
        fn = deco(fn)
    return fn


def options_from_context(address: str | None) -> ConnectionOptions:
    """The connection flags of the running command, with ``address`` (its own parameter)."""
    ctx = click.get_current_context(silent=True)
    kept: dict[str, Any] = dict(ctx.meta.get(_META, {})) if ctx is not None else {}
    return ConnectionOptions(address=address, **kept)
