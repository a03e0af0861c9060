"""Structured logging for every trainctl process: CLI, worker, demo.

Logs go to stderr because stdout is reserved for the single JSON object that ``--json`` prints.
Each line carries an ISO timestamp and, when emitted from inside a Temporal activity or workflow,
the ids needed to find the execution in the UI (workflow_id, run_id, activity_id, attempt); an
operator can jump from a log line straight to its event history. The standard-library loggers
(the Temporal SDK's own, ``activity.logger``) are routed through the same renderer so that one
process writes one format.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger
from temporalio import activity, workflow

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


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_temporal_context,
        structlog.processors.StackInfoRenderer(),
        redact_secrets,
    ]


def configure_logging(json: bool = False, level: str | int = "INFO") -> None:
    """Configure structlog and stdlib logging to write to stderr.

    Args:
        json: one JSON object per line (for log shippers) instead of human-readable console lines.
        level: minimum level, a name (``"DEBUG"``) or a ``logging`` constant.
    """
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"level: unknown log level {level!r}")

    renderer: Processor
    if json:
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())

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

    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if json:
        # Locals in tracebacks could leak secrets into log shippers.
        final.append(
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        )
    final.append(renderer)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_shared_processors(),
            processors=final,
        )
    )
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
