"""Structured logging for every trainctl process: CLI, worker, demo.

Logs go to stderr because stdout is reserved for the single JSON object that ``--json`` prints.
Each line carries an ISO timestamp and, when emitted from inside a Temporal activity or workflow,
the ids needed to find the execution in the UI (workflow_id, run_id, activity_id, attempt); an
operator can jump from a log line straight to its event history. The standard-library loggers
(the Temporal SDK's own, ``activity.logger``) are routed through the same renderer so that one
process writes one format.

No line shows a traceback's local variables, at any level, in either format: a frame's locals
hold whatever the code was handling (a password it read, a token it built). Tracebacks are
plain text, never rich's, so a workflow logging an exception inside the Temporal sandbox imports
nothing (rich imports itself lazily, and the sandbox refuses what it touches). An activity
attempt that failed on purpose (a temporary error: a store restarting, a backend not answering
yet; or an ``ApplicationError`` it raised) is one line, its traceback dropped: kind, attempt,
seconds to the next attempt, the error's first line. Every rendered line is scrubbed of the
secrets the process knows (``connection.known_secrets``) as the last step.
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

from orchestrator.contracts.errors import TemporaryError
from orchestrator.infra.connection import known_secrets, redact


def add_temporal_context(
    logger: WrappedLogger, method_name: str, event_dict: EventDict
) -> EventDict:
    """Add the current activity's or workflow's ids to ``event_dict`` (never overriding keys)."""
    try:
        if activity.in_activity():
            info = activity.info()
            event_dict.setdefault("workflow_id", info.workflow_id)
            event_dict.setdefault("run_id", info.workflow_run_id)
            event_dict.setdefault("activity_id", info.activity_id)
            event_dict.setdefault("activity_type", info.activity_type)
            event_dict.setdefault("attempt", info.attempt)
        elif workflow.in_workflow():
            winfo = workflow.info()
            event_dict.setdefault("workflow_id", winfo.workflow_id)
            event_dict.setdefault("run_id", winfo.run_id)
            event_dict.setdefault("workflow_type", winfo.workflow_type)
            event_dict.setdefault("attempt", winfo.attempt)
    except Exception:
        pass  # the context is a nicety; a log call must never fail because of it
    return event_dict


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Scrub every connection secret this process resolved (an API key quoted in an error a
    library raised, say) from the line's text values: no secret reaches a log."""
    secrets = known_secrets()
    if secrets:
        for key, value in event_dict.items():
            if isinstance(value, str):
                event_dict[key] = redact(value, secrets)
    return event_dict


#: The mark the Temporal SDK puts on its record of a failed activity attempt.
_ACTIVITY_FAILURE = "ActivityFailure"


def _deliberate(err: object) -> ApplicationError | TemporaryError | None:
    """``err`` if raised on purpose with a message that says it all, else None (a bug: its
    traceback is what finds it)."""
    return err if isinstance(err, ApplicationError | TemporaryError) else None


def _kind(err: ApplicationError | TemporaryError) -> str:
    """The error's type as Temporal records it in the history (and retry policies name it)."""
    return (err.type if isinstance(err, ApplicationError) else None) or type(err).__name__


def _next_retry(err: ApplicationError | TemporaryError) -> tuple[bool, float | None]:
    """Whether the server tries the running activity again after ``err``, and in how many
    seconds by its retry policy (None when the server did not tell the policy)."""
    if isinstance(err, ApplicationError) and err.non_retryable:
        return False, None
    info = activity.info()
    policy = info.retry_policy
    if policy is None:
        return True, None
    if _kind(err) in (policy.non_retryable_error_types or ()):
        return False, None
    if policy.maximum_attempts and info.attempt >= policy.maximum_attempts:
        return False, None
    first = policy.initial_interval.total_seconds()
    delay = first * policy.backoff_coefficient ** (info.attempt - 1)
    cap = policy.maximum_interval.total_seconds() if policy.maximum_interval else 100 * first
    return True, round(min(delay, cap), 1)


def one_line_attempts(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """The SDK's record of an activity attempt that failed on purpose as one line: kind,
    attempt, seconds to the next attempt (None: none follows, or the policy is unknown), the
    error's first line; its traceback dropped. A PostgreSQL restart fails every running
    activity at once, attempt after attempt: a traceback each would bury the log, and says
    nothing the kind does not."""
    record = event_dict.get("_record")
    if getattr(record, "__temporal_error_identifier", None) != _ACTIVITY_FAILURE:
        return event_dict
    exc_info = event_dict.get("exc_info")
    err = _deliberate(exc_info[1] if isinstance(exc_info, tuple) else None)
    if err is None or not activity.in_activity():
        return event_dict
    try:
        again, retry = _next_retry(err)
    except Exception:  # the policy is a nicety; a log call must never fail because of it
        again, retry = True, None
    event_dict.pop("exc_info")
    event_dict["event"] = "activity attempt failed; " + ("retrying" if again else "not retried")
    event_dict["kind"] = _kind(err)
    event_dict["attempt"] = activity.info().attempt
    event_dict["next_retry_s"] = retry
    event_dict["error"] = (str(err).strip().splitlines() or [""])[0][:300]
    return event_dict


def scrub_rendered(logger: WrappedLogger, method_name: str, rendered: Any) -> Any:
    """The rendered line without any secret the process knows: the last step, so a secret in
    text rendered late (an exception's message in a traceback) is caught too."""
    secrets = known_secrets()
    return redact(rendered, secrets) if secrets and isinstance(rendered, str) else rendered


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_temporal_context,
        one_line_attempts,
        structlog.processors.StackInfoRenderer(),
        redact_secrets,
    ]


def log_handler(json: bool, stream: IO[str]) -> logging.Handler:
    """A handler writing every record (structlog's and the standard library's) to ``stream``
    in one format: JSON lines, or console lines (coloured on a terminal); exceptions as a
    dict (JSON) or plain traceback text, neither with locals."""
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if json:
        final.append(
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        )
        final.append(structlog.processors.JSONRenderer())
    else:
        final.append(
            structlog.dev.ConsoleRenderer(
                colors=stream.isatty(), exception_formatter=structlog.dev.plain_traceback
            )
        )
    final.append(scrub_rendered)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared_processors(),
            processors=final,
        )
    )
    return handler


def configure_logging(json: bool = False, level: str | int = "INFO") -> None:
    """Configure structlog and stdlib logging to write to stderr.

    Args:
        json: one JSON object per line (for log shippers) instead of human-readable console lines.
        level: minimum level, a name (``"DEBUG"``) or a ``logging`` constant.
    """
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"level: unknown log level {level!r}")

    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        # Not cached: tests and the CLI may reconfigure (e.g. --json) after loggers exist.
        cache_logger_on_first_use=False,
    )
    handler = log_handler(json, sys.stderr)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_trainctl", False)]:
        root.removeHandler(old)
    handler._trainctl = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(numeric)


def get_logger(name: str | None = None, **initial: Any) -> FilteringBoundLogger:
    """Return a structlog logger bound to ``initial`` key/values."""
    logger: FilteringBoundLogger = structlog.get_logger(name, **initial)
    return logger
