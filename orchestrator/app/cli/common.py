"""Shared CLI conventions: one JSON object on stdout with --json, exit codes 0/1/2.

Exit 2 means bad input (the message names the field), exit 1 means the operation failed or an
invariant broke. Human output and logs go to stderr when --json is on, so stdout stays parseable.

The error contract, for every command: an error is one line, ``Error: <field>: <reason>`` on
stderr, and under ``--json`` also one object on stdout, ``{"error": "<message>", "field":
"<dotted field or null>", "exit_code": <n>}``, with that exit code. Never a traceback:
:func:`handle_errors` turns what a command raises into :class:`BadInput` or
:class:`OperationFailed`, and :class:`TrainctlGroup` renders those (and click's own usage
errors, and anything unexpected) by the contract. ``TRAINCTL_DEBUG=1`` shows the traceback of
an unexpected error.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import sqlite3
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import pydantic

from orchestrator.contracts.constants import TASK_QUEUE

if TYPE_CHECKING:
    from orchestrator.contracts.backend import FleetBackend

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

#: The longest error message printed; past it the message is cut (a spec can quote a lot).
MAX_MESSAGE = 2_000

_FIELD = re.compile(r"^([A-Za-z_][\w.\[\]-]*): ")


def one_line(text: str) -> str:
    """``text`` on one line (newlines and runs of blanks become one space), cut to a sane size."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= MAX_MESSAGE else flat[: MAX_MESSAGE - 3] + "..."


def field_of(message: str) -> str | None:
    """The dotted field a ``field: reason`` message names, or None."""
    m = _FIELD.match(message)
    return m.group(1) if m else None


class CliError(click.ClickException):
    """An error by the contract: a one-line message, the field at fault, an exit code.

    ``extra`` is merged into the ``--json`` error object (a refused plan carries the plan).
    """

    exit_code = EXIT_FAILED

    def __init__(
        self, message: str, field: str | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        text = strip_userinfo(one_line(message))
        super().__init__(text)
        self.field = field if field is not None else field_of(text)
        self.extra = strip_userinfo(extra or {})

    def as_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "error": self.message,
            "field": self.field,
            "exit_code": self.exit_code,
        }


class BadInput(CliError):
    """Input the user must fix; exits 2."""

    exit_code = EXIT_BAD_INPUT


class OperationFailed(CliError):
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


def _validation_field(err: pydantic.ValidationError) -> str | None:
    errors = err.errors()
    if not errors:
        return None
    loc = ".".join(str(p) for p in errors[0]["loc"])
    return field_of(str(errors[0]["msg"]).removeprefix("Value error, ")) or loc or None


def describe_os_error(err: OSError) -> str:
    """``cannot write /x/fleet.db: No space left on device`` and the like, on one line."""
    what = err.strerror or str(err) or type(err).__name__
    if err.filename is not None:
        return f"{err.filename}: {what}"
    return what


def describe_database_error(err: sqlite3.DatabaseError) -> tuple[str, str]:
    """(message, field) for a fleet database that cannot be used, said so one can act on it."""
    text = str(err)
    if "disk is full" in text:
        return f"TRAINCTL_HOME: the disk is full ({text}); free some space", "TRAINCTL_HOME"
    if "I/O" in text:
        return (
            f"TRAINCTL_HOME: cannot write the fleet database ({text}); disk full or failing?",
            "TRAINCTL_HOME",
        )
    if "locked" in text or "busy" in text:
        return f"fleet: the fleet database is busy ({text}); try again", "fleet"
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return f"TRAINCTL_HOME: cannot write the fleet database ({text})", "TRAINCTL_HOME"
    return (
        f"fleet: the fleet database is damaged or not a fleet ({text}); "
        "rebuild it with `trainctl fleet init --force`",
        "fleet",
    )


def classify(err: BaseException) -> CliError | None:
    """The contract's error for what a command raised, or None for a bug (no known kind)."""
    return _classify_trainctl_error(err) or _classify_library_error(err)


def _classify_trainctl_error(err: BaseException) -> CliError | None:
    """The contract's error for trainctl's own, click's and pydantic's errors, else None."""
    from orchestrator.contracts.errors import (
        NoFleet,
        NotFound,
        PermanentError,
        Refused,
        TemporaryError,
    )
    from orchestrator.contracts.paths import HomeError
    from orchestrator.contracts.specs import SpecError

    if isinstance(err, CliError):
        return err
    if isinstance(err, click.ClickException):
        return _usage_error(err)
    if isinstance(err, HomeError):
        return BadInput(str(err), field="TRAINCTL_HOME")
    if isinstance(err, SpecError):  # no field: the file itself (missing, a directory, binary)
        return BadInput(err.message, field=err.field or "spec")
    if isinstance(err, pydantic.ValidationError):
        return BadInput(describe_validation_error(err), field=_validation_field(err))
    if isinstance(err, NoFleet):
        return OperationFailed(str(err), field=err.field)
    if isinstance(err, NotFound):  # never there: bad input naming the field; ended: failed
        if not err.absent:
            return OperationFailed(str(err), field=err.field)
        text = str(err)
        if err.field and not text.startswith(f"{err.field}:"):
            text = f"{err.field}: {text}"
        return BadInput(text, field=err.field)
    if isinstance(err, Refused):
        return BadInput(str(err), field=err.field)
    if isinstance(err, TemporaryError):  # not now (no worker answering, a limit): exit 1
        return OperationFailed(str(err) or type(err).__name__, field=err.field)
    if isinstance(err, PermanentError):
        return BadInput(str(err), field=err.field)
    return None


def _classify_library_error(err: BaseException) -> CliError | None:
    """The contract's error for the standard library's errors (SQLite, JSON, OS), else None."""
    if isinstance(err, sqlite3.DatabaseError):
        message, field = describe_database_error(err)
        if "readonly" in str(err) or "read-only" in str(err):  # like a read-only mount
            return BadInput(message, field=field)
        return OperationFailed(message, field=field)
    if isinstance(err, json.JSONDecodeError):  # specs raise SpecError: this is stored data
        return OperationFailed(
            f"fleet: the fleet database holds damaged data ({err}); "
            "rebuild it with `trainctl fleet init --force`"
        )
    if isinstance(err, FileNotFoundError):  # a missing fleet or state file: nothing to act on
        return OperationFailed(describe_os_error(err))
    if isinstance(err, OSError):
        if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return OperationFailed(
                f"TRAINCTL_HOME: no space left: {describe_os_error(err)}", field="TRAINCTL_HOME"
            )
        if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return BadInput(f"TRAINCTL_HOME: cannot write: {describe_os_error(err)}")
        return OperationFailed(describe_os_error(err))
    if isinstance(err, KeyError):
        text = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        return BadInput(text)
    if isinstance(err, ValueError):
        return BadInput(str(err))
    if isinstance(err, LookupError | TimeoutError | RuntimeError):
        return OperationFailed(str(err) or type(err).__name__)
    return None


def cli_error(err: BaseException) -> CliError:
    """``classify``, with anything it does not know as a failure (exit 1)."""
    return classify(err) or OperationFailed(str(err) or type(err).__name__)


def _usage_error(err: click.ClickException) -> CliError:
    """Click's own errors (bad option value, missing option, no such command) by the contract."""
    field: str | None = None
    if isinstance(err, click.BadParameter) and err.param is not None:
        param = err.param
        field = param.name
        if isinstance(param, click.Option) and param.opts:  # as typed: --spec, not spec_path
            field = max(param.opts, key=len).lstrip("-").replace("-", "_")
    elif isinstance(err, click.BadParameter) and isinstance(err.param_hint, str):
        field = err.param_hint.strip("'\"").lstrip("-").replace("-", "_")  # as typed, no quotes
        return _by_code(err, f"{field}: {err.message}", field)
    elif isinstance(err, click.NoSuchOption):
        field = err.option_name.lstrip("-").replace("-", "_")
    message = err.format_message()
    if field and not message.startswith(f"{field}:"):
        message = f"{field}: {message}"
    return _by_code(err, message, field)


def _by_code(err: click.ClickException, message: str, field: str | None) -> CliError:
    """Click's usage errors (exit 2) are bad input; everything else it raises is a failure."""
    cls = BadInput if err.exit_code == EXIT_BAD_INPUT else OperationFailed
    return cls(message, field=field)


#: ``--cron`` of ``ops start`` and ``campaign start``: a Temporal Schedule instead of one run.
cron_option = click.option(
    "--cron",
    default=None,
    help="Run it again at each instant of this cron (UTC) as a Temporal Schedule, never two "
    "runs at once; see `trainctl schedule`.",
)


def handle_errors(fn: F) -> F:
    """Map what a command raises to the contract: bad input exits 2, failures exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except Exception as err:
            mapped = classify(err)
            if mapped is None or mapped is err:
                raise
            raise mapped from None

    return wrapper  # type: ignore[return-value]


def report(err: CliError, as_json: bool) -> None:
    """Print ``err`` by the contract: one line on stderr and, under --json, one JSON object on
    stdout (stderr is for people either way, stdout for programs)."""
    if as_json:
        sys.stdout.write(json.dumps(err.as_json(), default=str) + "\n")
        sys.stdout.flush()
    click.echo(f"Error: {err.message}", err=True)


def wants_json(args: Sequence[str]) -> bool:
    return "--json" in args


class TrainctlGroup(click.Group):
    """The root group: every error leaves by the contract, whatever raised it."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            if not standalone_mode:
                raise
            report(OperationFailed("aborted"), wants_json(argv))
            sys.exit(EXIT_FAILED)
        except Exception as err:
            if not standalone_mode:
                raise
            mapped = classify(err)
            if mapped is None:
                if os.environ.get("TRAINCTL_DEBUG"):
                    traceback.print_exc()
                mapped = OperationFailed(
                    f"internal error: {type(err).__name__}: {err} "
                    "(set TRAINCTL_DEBUG=1 for the traceback)"
                )
            report(mapped, wants_json(argv))
            sys.exit(mapped.exit_code)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


#: ``scheme://user:password@`` in a URL: what :func:`strip_userinfo` cuts from any output.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def strip_userinfo(value: Any) -> Any:
    """``value`` (text, or a JSON-like tree) with every URL's ``user:password@`` removed: a
    status recorded by an older version may quote a Prometheus URL with its password."""
    if isinstance(value, str):
        return _USERINFO.sub(r"\1", value) if "@" in value else value
    if isinstance(value, dict):
        return {k: strip_userinfo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_userinfo(v) for v in value]
    return value


def emit(obj: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], None]) -> None:
    """Print ``obj`` as one JSON object, or call ``human`` to render it for a person."""
    obj = strip_userinfo(obj)
    if as_json:
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
    else:
        human(obj)


def emit_with_warnings(
    obj: dict[str, Any],
    warnings: list[str],
    as_json: bool,
    human: Callable[[dict[str, Any]], None],
) -> None:
    """``emit`` with what the command adjusted or doubts: a ``warnings`` list in the JSON
    object, or one ``warning:`` line each on stderr before the human output."""
    if as_json:
        emit({**obj, "warnings": list(warnings)}, as_json, human)
        return
    for text in warnings:
        click.echo(f"warning: {text}", err=True)
    emit(obj, as_json, human)


def fail(message: str, field: str | None = None) -> NoReturn:
    raise OperationFailed(message, field=field)


def open_fleet_or_fail(read_only: bool = False) -> FleetBackend:
    """The fleet under TRAINCTL_HOME, or exit 1 naming ``fleet`` (none, or not a usable one).

    ``read_only`` for a command that only reads: it works on a read-only or immutable file and
    never creates TRAINCTL_HOME."""
    from orchestrator.fleet import open_fleet

    try:
        return open_fleet(read_only=read_only)
    except FileNotFoundError as err:
        fail(str(err), field="fleet")


#: The longest ``--reason`` kept (it lands in a workflow's history and status).
MAX_REASON = 500


def _reason(ctx: click.Context, param: click.Parameter, value: str) -> str:
    text = " ".join(value.split())
    if len(text) > MAX_REASON:
        raise click.BadParameter(f"at most {MAX_REASON} characters", param=param)
    return text


reason_option = click.option(
    "--reason", default="", callback=_reason, help="Why (kept in the status and history)."
)

#: The queue this fleet's workers poll: where commands start workflows, and whose workers the
#: same-fleet check asks (``reach.fleet_task_queue``).
task_queue_option = click.option(
    "--task-queue",
    default=TASK_QUEUE,
    envvar="TRAINCTL_TASK_QUEUE",
    show_default=True,
    help="The queue this fleet's workers poll (or $TRAINCTL_TASK_QUEUE).",
)

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout."
)
