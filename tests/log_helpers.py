"""The worker's log as a test reads it: both formats at once, rendered by the handlers
``trainctl worker`` installs (``orchestrator.infra.logging``), into strings instead of stderr."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import structlog

from orchestrator.infra.logging import configure_logging, log_handler


@dataclass
class Logs:
    """What the process logged while the block ran: console text and JSON lines."""

    text_stream: io.StringIO = field(default_factory=io.StringIO)
    json_stream: io.StringIO = field(default_factory=io.StringIO)

    @property
    def text(self) -> str:
        return self.text_stream.getvalue()

    @property
    def json_text(self) -> str:
        return self.json_stream.getvalue()

    def records(self) -> list[dict[str, Any]]:
        """Every JSON line, parsed (each line is one object)."""
        return [json.loads(line) for line in self.json_text.splitlines()]


@contextlib.contextmanager
def worker_logs(level: str = "INFO") -> Iterator[Logs]:
    """Configure logging as the worker does, and capture every line in both formats (text as
    ``trainctl worker`` writes it, JSON as with ``--log-format json``); restored after."""
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    logs = Logs()
    configure_logging(json=False, level=level)
    handlers = [log_handler(False, logs.text_stream), log_handler(True, logs.json_stream)]
    for h in handlers:
        root.addHandler(h)
    try:
        yield logs
    finally:
        for h in list(root.handlers):
            if h not in before[1]:
                root.removeHandler(h)
        root.setLevel(before[0])
        structlog.reset_defaults()
