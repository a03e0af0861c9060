"""Every alert rule in ``deploy/alerts.yml`` has a runbook: a ``runbook_url`` naming a page under
``docs/runbooks/`` that exists, is titled with the alert, says how to confirm and what to do, and
is listed in the runbooks' index. The rules file is read, so a rule added later needs a page."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests.rule_tests import ALERTS

ROOT = ALERTS.parents[1]
RUNBOOKS = ROOT / "docs" / "runbooks"
SECTIONS = ("## What fired", "## How to confirm", "## What to do", "## When to escalate")


def _rules() -> list[dict]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_every_rule_has_a_runbook_page_that_names_it() -> None:
    """Each rule's runbook_url is a page in the repository, titled with the alert's name, with
    the four sections on-call reads, and a trainctl command to confirm it."""
    rules = _rules()
    assert len(rules) >= 12
    for rule in rules:
        name, url = rule["alert"], rule["annotations"].get("runbook_url", "")
        assert url.startswith("docs/runbooks/") and url.endswith(".md"), (name, url)
        page = (ROOT / url).resolve()
        assert page.is_relative_to(RUNBOOKS.resolve()) and page.is_file(), (name, url)
        text = page.read_text()
        assert text.splitlines()[0] == f"# {name}", (name, url)
        for section in SECTIONS:
            assert section in text, (name, section)
        assert "trainctl " in text.split("## How to confirm")[1].split("## What to do")[0], name


def test_runbook_index_lists_every_page_and_links_resolve() -> None:
    """The index links every runbook page; every relative link in a runbook resolves."""
    index = (RUNBOOKS / "index.md").read_text()
    pages = sorted(p.name for p in RUNBOOKS.glob("*.md") if p.name != "index.md")
    assert pages == sorted({Path(r["annotations"]["runbook_url"]).name for r in _rules()})
    for page in RUNBOOKS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            assert "://" not in target and (RUNBOOKS / target).is_file(), (page.name, target)
    for name in pages:
        assert f"]({name})" in index, name


def test_promtool_accepts_the_rules() -> None:
    """``promtool check rules`` passes on the shipped file, runbook annotations included."""
    out = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
