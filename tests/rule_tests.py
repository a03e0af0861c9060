"""Run promtool's unit tests of the shipped alert rules (``deploy/alerts.yml``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ALERTS = Path(__file__).resolve().parents[1] / "deploy" / "alerts.yml"


def promtool_rule_test(tmp_path: Path, tests: list[dict[str, Any]]) -> None:
    """``promtool test rules`` over ``tests`` (series in, alerts expected); asserts it passes."""
    case = {"rule_files": [str(ALERTS)], "evaluation_interval": "1m", "tests": tests}
    path = tmp_path / "rule_test.json"
    path.write_text(json.dumps(case))
    out = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
