"""The real CLI run in this process (a thread), for tests that call it many times.

A subprocess per call costs seconds of imports on a loaded machine; ``CliRunner`` runs the
same ``main`` with the same environment (``TEMPORAL_ADDRESS``, ``TRAINCTL_HOME``) in a thread,
so the commands' own ``asyncio.run`` never meets the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from click.testing import CliRunner

from orchestrator.app.cli import main


async def cli(*args: str) -> tuple[int, dict[str, Any], str]:
    """(exit code, its JSON output, stderr) of ``trainctl *args``."""
    res = await asyncio.to_thread(CliRunner().invoke, main, list(args))
    return res.exit_code, json.loads(res.stdout or "{}"), res.stderr
