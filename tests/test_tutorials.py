"""The docs site's tutorials run as written: each page's ``bash`` blocks, in one shell, succeed.

Each tutorial starts its own Temporal server and worker (on free ports) over its own fleet and
ends with ``trainctl audit`` passing; the fleet it made is audited again after the test. What a
page says its reader brings, the test brings: the PostgreSQL tutorial gets the session's real
PostgreSQL through ``PG*`` variables (its databases audited after the test too); a Slurm lab a
page started is stopped after the test whatever happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.tutorial_runner import DOCS, bash_blocks, run_tutorial

#: The databases the PostgreSQL tutorial creates (dropped first, so a rerun starts clean).
PG_TUTORIAL_DATABASES = ("trainctl_tutorial", "trainctl_tutorial_restored")

TUTORIALS = sorted(p for p in (DOCS / "tutorials").glob("*.md") if p.name != "index.md")


def test_every_tutorial_has_commands_and_is_in_the_index() -> None:
    """Each tutorial page has commands to run and the tutorials' index links it."""
    index = (DOCS / "tutorials" / "index.md").read_text()
    for page in TUTORIALS:
        assert bash_blocks(page), page.name
        assert f"({page.name})" in index, page.name


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs_as_written(
    page: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every command of the tutorial succeeds in order, ending with the audit passing."""
    with _services(page, tmp_path, request) as services:
        done = run_tutorial(page, tmp_path, services)
    tail = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    logs = "".join(
        f"\n--- {log.name}:\n{log.read_text(errors='replace')[-2000:]}"
        for log in sorted((tmp_path / "tmp").glob("*/*.log"))
    )  # the server's and the worker's, when a step waited on them
    assert done.returncode == 0, f"{page.name} stopped:\n{tail}{logs}"
    assert '"ok": true' in done.stdout


@contextmanager
def _services(page: Path, tmp: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment the page expects its reader to bring, and the cleanup after it."""
    if page.stem == "postgresql":
        yield _postgresql_for_the_page(request)
        return
    try:
        yield {}
    finally:
        from orchestrator.lab.slurm import lab_down

        for lab in (tmp / "tmp").glob("*/slurm-lab"):
            lab_down(lab.parent)


def _postgresql_for_the_page(request: pytest.FixtureRequest) -> dict[str, str]:
    from tests.conftest import _PG_STORES
    from tests.pg_helpers import PASSWORD, USER

    server = request.getfixturevalue("pg_server")
    for db in PG_TUTORIAL_DATABASES:
        server.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        request.node.stash.setdefault(_PG_STORES, []).append(server.url(db))
    return {
        "PGHOST": "127.0.0.1",
        "PGPORT": str(server.port),
        "PGUSER": USER,
        "PGPASSWORD": PASSWORD,
    }
