"""The dependency lock: current against pyproject.toml, and CI stops when it is not."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lock"), "--check", "--root", str(root)],
        capture_output=True,
        text=True,
    )


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split(" ")[0].split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_the_committed_lock_is_current() -> None:
    """The lock in the repository was made from pyproject.toml as it is."""
    result = _check(ROOT)
    assert result.returncode == 0, result.stderr


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    """Each runtime and test requirement has an exact, hashed release inside its range."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for text in project["dependencies"] + project["optional-dependencies"]["test"]:
        req = Requirement(text)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not in requirements.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    assert "--hash=sha256:" in (ROOT / "requirements.txt").read_text()


def test_a_dependency_added_without_relocking_fails_the_check(tmp_path: Path) -> None:
    """Adding a dependency to pyproject.toml and not running scripts/lock makes the check fail."""
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text)
    assert _check(tmp_path).returncode == 1  # no lock at all is stale too
    shutil.copy(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    assert _check(tmp_path).returncode == 0
    changed = text.replace('"pyyaml>=6.0",', '"pyyaml>=6.0",\n    "httpx>=0.27",', 1)
    assert changed != text
    (tmp_path / "pyproject.toml").write_text(changed)
    result = _check(tmp_path)
    assert result.returncode == 1
    assert "run scripts/lock" in result.stderr
    # Reformatting alone (no dependency changed) keeps the lock current.
    (tmp_path / "pyproject.toml").write_text(text.replace('    "pyyaml>=6.0",', '  "pyyaml>=6.0",'))
    assert _check(tmp_path).returncode == 0
