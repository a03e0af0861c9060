"""No development issue number in text the product shows: every string the code can print (UI
pages, status lines, errors, warnings) is scanned. ``--help`` is covered by the generated CLI
reference, which the docs check scans and ``tests/test_reference.py`` keeps up to date."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_docs_site import ISSUE_NUMBER

ROOT = Path(__file__).resolve().parent.parent
#: The packages whose strings reach users: the CLI and its pages, workflows' UI details and
#: summaries, activities' errors.
PACKAGES = ("orchestrator", "workflows", "activities")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr):
            out.add(id(node.body[0].value))
    return out


def issue_numbers(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant, docstrings aside, naming an issue number."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and ISSUE_NUMBER.search(node.value)
    ]


def test_no_issue_number_in_any_string_the_code_prints() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in issue_numbers(path.read_text())
    ]
    assert not found, found


def test_the_scan_bites() -> None:
    assert issue_numbers('x = f"held (see #42)"\n') == [(1, "held (see #42)")]
    assert issue_numbers('"""Built for issue 30."""\nx = "fine"\n') == []
