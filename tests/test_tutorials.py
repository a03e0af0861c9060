"""The docs site's tutorials run as written: each page's ``bash`` blocks, in one shell, succeed.

Each tutorial starts its own Temporal server and worker (on free ports) over its own fleet and
ends with ``trainctl audit`` passing; the fleet it made is audited again after the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tutorial_runner import DOCS, bash_blocks, run_tutorial

TUTORIALS = sorted(p for p in (DOCS / "tutorials").glob("*.md") if p.name != "index.md")


def test_every_tutorial_has_commands_and_is_in_the_index() -> None:
    """Each tutorial page has commands to run and the tutorials' index links it."""
    index = (DOCS / "tutorials" / "index.md").read_text()
    for page in TUTORIALS:
        assert bash_blocks(page), page.name
        assert f"({page.name})" in index, page.name


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs_as_written(page: Path, tmp_path: Path) -> None:
    """Every command of the tutorial succeeds in order, ending with the audit passing."""
    done = run_tutorial(page, tmp_path)
    tail = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    logs = "".join(
        f"\n--- {log.name}:\n{log.read_text(errors='replace')[-2000:]}"
        for log in sorted((tmp_path / "tmp").glob("*/*.log"))
    )  # the server's and the worker's, when a step waited on them
    assert done.returncode == 0, f"{page.name} stopped:\n{tail}{logs}"
    assert '"ok": true' in done.stdout
