"""The layer contracts bite: an import that runs up a layer, or across two sibling features,
fails ``lint-imports`` (the check ``.ci/run`` runs), and the tree as committed passes it.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``). Each case copies the three
packages into a temporary directory, adds one wrong import and runs the real tool over the copy,
so a contract that was loosened (an ``ignore_imports``, a layer dropped) makes a case pass where
it must fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "workflows", "activities")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    lint = shutil.which("lint-imports")
    assert lint, "lint-imports (import-linter) is installed by scripts/test"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [lint, "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_tree(dest: Path) -> Path:
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_committed_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = lint_imports(copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "says"),
    [
        # the bottom layer reaching the top
        ("orchestrator/contracts/views.py", "import orchestrator.app.cli", "orchestrator.app"),
        # the fleet package reaching planning (policy belongs above the backends)
        (
            "orchestrator/fleet/event_log.py",
            "import orchestrator.planning.train_plan",
            "orchestrator.planning",
        ),
        # two features beside each other: independent siblings
        ("orchestrator/ops/ui.py", "import orchestrator.campaign.ui", "orchestrator.campaign"),
        # an activity reaching a workflow
        ("activities/fleet_access.py", "import workflows.cluster_train", "workflows"),
        # planning opening a fleet
        (
            "orchestrator/planning/rollout.py",
            "import orchestrator.fleet.build",
            "orchestrator.fleet",
        ),
    ],
)
def test_a_wrong_import_fails_the_check(
    tmp_path: Path, module: str, wrong_import: str, says: str
) -> None:
    tree = copy_tree(tmp_path)
    target = tree / module
    target.write_text(target.read_text() + f"\n{wrong_import}  # noqa: E402\n")
    result = lint_imports(tree)
    assert result.returncode != 0, f"{module} importing {says} was not caught"
    assert "BROKEN" in result.stdout
    assert says in result.stdout


def test_no_loose_module_beside_the_layers(tmp_path: Path) -> None:
    """A module dropped straight under ``orchestrator/`` belongs to no layer: refused."""
    tree = copy_tree(tmp_path)
    (tree / "orchestrator" / "helpers.py").write_text('"""A loose module."""\n')
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "helpers" in result.stdout + result.stderr
