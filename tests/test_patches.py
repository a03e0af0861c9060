"""The patch registry check bites: a patch id the registry does not list, an id it cannot read,
a listed id no workflow uses, or a call left past the release that retires it fails
``scripts/check_patches.py`` (the check ``.ci/run`` runs), and the tree as committed passes it.

Each case copies ``workflows/``, the checker and ``pyproject.toml`` into a temporary directory,
adds a probe module with its own patch ids (so the cases hold whichever patches the workflows
carry today) and runs the real script over the copy, as ``tests/test_layers.py`` does for the
layer contracts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKER = "scripts/check_patches.py"
#: A sibling module whose constants the probe's calls name.
CONSTS = (
    '"""Probe constants."""\n\nSIBLING_PATCH = "probe-sibling"\nMODULE_PATCH = "probe-module"\n'
)
#: One call per way of naming an id the check resolves: (line of the call, id).
RESOLVED = '''"""A probe workflow module: one patch call per way of naming an id."""

import workflows.probe_consts
from temporalio import workflow
from temporalio.workflow import patched as check_patch
from workflows import probe_consts
from workflows.probe_consts import SIBLING_PATCH as OTHER

LOCAL_PATCH = "probe-local"
ALIAS_PATCH = LOCAL_PATCH


def probe() -> list[bool]:
    return [
        workflow.patched("probe-literal"),
        workflow.patched(ALIAS_PATCH),
        workflow.patched(OTHER),
        workflow.patched(probe_consts.MODULE_PATCH),
        workflow.patched(workflows.probe_consts.MODULE_PATCH),
        check_patch(id="probe-keyword"),
    ]
'''
RESOLVED_IDS = {
    15: "probe-literal",
    16: "probe-local",
    17: "probe-sibling",
    18: "probe-module",
    19: "probe-module",
    20: "probe-keyword",
}
#: Ids the check cannot read: each a problem of its own, on these lines.
UNRESOLVED = '''"""A probe workflow module: patch ids known only when it runs."""

from temporalio import workflow

PROBE_PATCH = "probe-shadowed"


class Probe:
    PATCH = "probe-class"

    def run(self, name: str, n: int) -> list[bool]:
        PROBE_PATCH = name
        ask = workflow.patched
        return [
            workflow.patched(name),
            workflow.patched(f"probe-{n}"),
            workflow.patched(PROBE_PATCH),
            workflow.patched(self.PATCH),
            ask("probe-indirect"),
        ]
'''
UNRESOLVED_LINES = (15, 16, 17, 18)
FAR = "99.0.0"  # a release never reached, so listed probe ids are not due


def copy_tree(dest: Path, alone: bool) -> Path:
    """Copy the checker's inputs; ``alone``: only the package's ``__init__`` and registry."""
    keep = ("__init__.py", "patches.py")

    def ignore(_dir: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or (alone and n not in keep)]

    shutil.copytree(ROOT / "workflows", dest / "workflows", ignore=ignore)
    (dest / "scripts").mkdir()
    shutil.copy(ROOT / CHECKER, dest / CHECKER)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def probe(tmp_path: Path, code: str, listed: str = "", version: str = "") -> str:
    """Check a copy holding ``workflows/probe.py`` and ``listed`` appended to the registry.

    With a ``version`` the copy is that release and holds the probe alone (the workflows'
    own patches would be due at some releases). Returns the checker's output, prefixed with
    its exit code (``rc=N``)."""
    tree = copy_tree(tmp_path, alone=bool(version))
    (tree / "workflows" / "probe_consts.py").write_text(CONSTS)
    (tree / "workflows" / "probe.py").write_text(code)
    registry = tree / "workflows" / "patches.py"
    registry.write_text(registry.read_text() + ("PATCHES.clear()\n" if version else "") + listed)
    if version:
        pyproject = tree / "pyproject.toml"
        text = re.sub(r'(?m)^version = ".*"$', f'version = "{version}"', pyproject.read_text())
        pyproject.write_text(text)
    result = subprocess.run(
        [sys.executable, str(tree / CHECKER)], cwd=tree, capture_output=True, text=True, timeout=60
    )
    return f"rc={result.returncode}\n{result.stdout}{result.stderr}"


def listing(ids: list[str], entry: str = f'Patch("{FAR}")') -> str:
    return "".join(f'PATCHES["{i}"] = {entry}\n' for i in ids)


def test_the_committed_tree_passes(tmp_path: Path) -> None:
    """The committed registry lists exactly the ids the workflows use, at the right stage."""
    out = probe(tmp_path, '"""An empty probe."""\n')
    assert out.startswith("rc=0\n"), out[-3000:]
    assert re.search(r"patches: \d+ ids at \d+ call sites", out)


def test_every_unlisted_id_fails_and_is_named(tmp_path: Path) -> None:
    """An unlisted id fails however it is named: literal, constant, import, attribute, keyword."""
    out = probe(tmp_path, RESOLVED)
    assert out.startswith("rc=1\n"), out
    for line, patch_id in RESOLVED_IDS.items():
        found = re.search(rf"workflows/probe\.py:{line}: .*'{patch_id}'.*not listed", out)
        assert found, f"line {line} ({patch_id}) was not caught:\n{out}"


def test_the_same_ids_listed_pass(tmp_path: Path) -> None:
    """Once the registry lists them, the same calls pass and are counted."""
    out = probe(tmp_path, RESOLVED, listing(sorted(set(RESOLVED_IDS.values()))))
    assert out.startswith("rc=0\n"), out


def test_an_id_known_only_at_run_time_fails(tmp_path: Path) -> None:
    """A parameter, f-string, shadowing local, attribute or indirect call cannot be checked."""
    out = probe(tmp_path, UNRESOLVED, listing(["probe-shadowed", "probe-class"]))
    assert out.startswith("rc=1\n"), out
    for line in UNRESOLVED_LINES:
        assert re.search(rf"workflows/probe\.py:{line}: .*cannot be checked", out), out
    assert "probe.py:13: workflow.patched is used other than as a direct call" in out
    assert "'probe-shadowed' is listed but no workflow uses it" in out


def test_a_listed_id_no_workflow_uses_fails(tmp_path: Path) -> None:
    """A registry entry left behind after its last call went fails, so the list stays true."""
    out = probe(tmp_path, '"""An empty probe."""\n', listing(["probe-gone"]))
    assert out.startswith("rc=1\n"), out
    assert "workflows/patches.py: patch id 'probe-gone' is listed but no workflow uses it" in out


@pytest.mark.parametrize(
    ("call", "entry", "version", "says"),
    [
        ("patched", 'Patch("0.3.0")', "0.2.9", ""),
        ("patched", 'Patch("0.3.0")', "0.3.0", "due for deprecation in 0.3.0"),
        ("deprecate_patch", 'Patch("0.3.0", removed_in="0.4.0")', "0.3.0", ""),
        ("deprecate_patch", 'Patch("0.3.0")', "0.3.0", "no removed_in"),
        ("patched", 'Patch("0.3.0", removed_in="0.4.0")', "0.2.9", "lists it as deprecated"),
        ("deprecate_patch", 'Patch("0.3.0", removed_in="0.4.0")', "0.4.0", "due for removal"),
        ("deprecate_patch", 'Patch("0.3.0", removed_in="0.3.0")', "0.3.0", "not a release after"),
    ],
)
def test_the_lifecycle(tmp_path: Path, call: str, entry: str, version: str, says: str) -> None:
    """A patch goes patched, then deprecate_patch with a removal release, then away, on time."""
    code = f'"""A probe."""\n\nfrom temporalio import workflow\n\nworkflow.{call}("probe-life")\n'
    out = probe(tmp_path, code, listing(["probe-life"], entry), version)
    if not says:
        assert out.startswith("rc=0\n"), out
    else:
        assert out.startswith("rc=1\n"), out
        assert says in out


def test_ci_runs_the_check() -> None:
    """``.ci/run`` runs the checker, so the cases above are what CI enforces."""
    assert f"python {CHECKER}" in (ROOT / ".ci" / "run").read_text()
