"""Run promtool's unit tests of the shipped alert rules (``deploy/alerts.yml``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

ALERTS = Path(__file__).resolve().parents[1] / "deploy" / "alerts.yml"


def runbook_urls() -> dict[str, str]:
    """alert name -> its ``runbook_url`` annotation, as the rules file gives it."""
    doc = yaml.safe_load(ALERTS.read_text())
    return {
        r["alert"]: r.get("annotations", {}).get("runbook_url", "")
        for g in doc["groups"]
        for r in g["rules"]
        if "alert" in r
    }


def _with_runbooks(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tests`` with each expected alert's annotations completed by the rule's static
    ``runbook_url`` (promtool compares every annotation; the cases state only the summary)."""
    urls = runbook_urls()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            url = urls.get(check["alertname"], "")
            for alert in check.get("exp_alerts", []):
                if "exp_annotations" in alert and url:
                    alert["exp_annotations"].setdefault("runbook_url", url)
    return tests


def promtool_rule_test(tmp_path: Path, tests: list[dict[str, Any]]) -> None:
    """``promtool test rules`` over ``tests`` (series in, alerts expected); asserts it passes."""
    case = {
        "rule_files": [str(ALERTS)],
        "evaluation_interval": "1m",
        "tests": _with_runbooks(tests),
    }
    path = tmp_path / "rule_test.json"
    path.write_text(json.dumps(case))
    out = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
