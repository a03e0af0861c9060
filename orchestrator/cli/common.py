"""Shared CLI conventions: one JSON object on stdout with --json, exit codes 0/1/2.

Exit 2 means bad input (the message names the field), exit 1 means the operation failed or an
invariant broke. Human output and logs go to stderr when --json is on, so stdout stays parseable.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
import pydantic

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(click.ClickException):
    """Input the user must fix; exits 2."""

    exit_code = EXIT_BAD_INPUT


class OperationFailed(click.ClickException):
    """The operation ran and failed, or an invariant is broken; exits 1."""

    exit_code = EXIT_FAILED


def describe_validation_error(err: pydantic.ValidationError) -> str:
    """One line per problem, each naming the field path."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "input"
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(msg if msg.startswith(f"{loc}:") else f"{loc}: {msg}")
    return "; ".join(parts)


def handle_errors(fn: F) -> F:
    """Map validation errors to exit 2 and unexpected runtime failures to exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.ClickException:
            raise
        except pydantic.ValidationError as err:
            raise BadInput(describe_validation_error(err)) from None
        except (ValueError, KeyError) as err:
            text = err.args[0] if err.args else str(err)
            raise BadInput(str(text)) from None

    return wrapper  # type: ignore[return-value]


def emit(obj: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], None]) -> None:
    """Print ``obj`` as one JSON object, or call ``human`` to render it for a person."""
    if as_json:
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
    else:
        human(obj)


def fail(message: str) -> NoReturn:
    raise OperationFailed(message)


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout."
)
