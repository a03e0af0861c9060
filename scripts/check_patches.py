"""Check the patch registry (``workflows/patches.py``) against the patch calls in ``workflows/``.

Every ``workflow.patched(id)`` and ``workflow.deprecate_patch(id)`` call under ``workflows/`` must
use an id the registry lists at the right stage of its lifecycle, every listed id must still be
used, and no call may outlive the release (``pyproject.toml``'s version) that retires its id.
``.ci/run`` runs ``python scripts/check_patches.py [ROOT]``: exit 0 with a one-line summary, or
exit 1 with one line per problem, each naming the file and line to fix.

Ids are read from the source by an AST walk (no workflow module is imported; the registry of the
tree checked is). An id is a string literal, or a name (``RESTING_PATCH``) or dotted name
(``fleet_timing.POLL_WALL_CAP_PATCH``) that leads, through the module's top-level assignments and
its imports from the ``workflows`` package, to a top-level string constant of a module in that
package. Anything else (a function parameter or local, an f-string, a class attribute, the SDK
function passed around rather than called) is itself a problem: the registry cannot be checked
against an id known only when a workflow runs.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

PACKAGE = "workflows"
REGISTRY = "workflows/patches.py"
CALLS = ("patched", "deprecate_patch")
SDK_MODULE = "temporalio.workflow"
#: How many names one id may pass through (``A = B``, re-exports) before giving up.
MAX_HOPS = 20
#: What a name is bound to when it is no string (a function, a class, one of several unpacked).
UNKNOWN = ast.Constant(None)


@dataclass
class Module:
    """One module of the workflows package: what its top-level names are bound to."""

    name: str
    path: str
    tree: ast.Module
    #: top-level name -> its assigned expression, or the dotted name it imports; None when the
    #: name is bound more than once (which binding a call sees is not known statically)
    bindings: dict[str, ast.expr | str | None] = field(default_factory=dict)
    #: every name any import in the module binds -> the dotted name it imports (finds the SDK)
    imported: dict[str, str] = field(default_factory=dict)


class Entry(Protocol):
    """What the checker reads of a registry entry (``workflows.patches.Patch``)."""

    @property
    def deprecated_in(self) -> str: ...
    @property
    def removed_in(self) -> str | None: ...


@dataclass(frozen=True)
class Use:
    """One patch call: where, which call, and its id (None when it cannot be resolved)."""

    where: str
    call: str
    patch_id: str | None
    source: str


def top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run at import: the body, through ``with``/``if``/``try`` blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.With | ast.If):
            yield from top_level(stmt.body)
            yield from top_level(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try | ast.TryStar):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from top_level(block)
            for handler in stmt.handlers:
                yield from top_level(handler.body)


def import_targets(stmt: ast.Import | ast.ImportFrom, module: str) -> Iterator[tuple[str, str]]:
    """(bound name, dotted name it imports) for each name an import statement binds."""
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                head = alias.name.split(".")[0]
                yield head, head
        return
    base = stmt.module or ""
    if stmt.level:
        package = module.split(".") if module == PACKAGE else module.split(".")[:-1]
        parent = package[: len(package) - (stmt.level - 1)]
        base = ".".join([*parent, *([stmt.module] if stmt.module else [])])
    for alias in stmt.names:
        yield alias.asname or alias.name, f"{base}.{alias.name}"


def load_module(root: Path, path: Path) -> Module:
    """Parse one module and record its top-level bindings and every import's names."""
    rel = path.relative_to(root)
    parts = list(rel.with_suffix("").parts)
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    mod = Module(name, rel.as_posix(), ast.parse(path.read_text(), filename=str(path)))
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            mod.imported.update(import_targets(node, name))

    def bind(target: str, value: ast.expr | str) -> None:
        mod.bindings[target] = None if target in mod.bindings else value

    for stmt in top_level(mod.tree.body):
        if isinstance(stmt, ast.Assign):
            for tgt in stmt.targets:
                for node in ast.walk(tgt):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        bind(node.id, stmt.value if tgt is node else UNKNOWN)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign) and isinstance(stmt.target, ast.Name):
            bind(stmt.target.id, stmt.value or UNKNOWN)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for bound, dotted in import_targets(stmt, name):
                bind(bound, dotted)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind(stmt.name, UNKNOWN)
    return mod


def dotted(expr: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value)
        return None if base is None else [*base, expr.attr]
    return None


class Resolver:
    """Resolves an id expression to its string, through constants of the workflows package."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules

    def value(self, module: str, expr: ast.expr | str | None, hops: int = 0) -> str | None:
        """The string ``expr`` (as written in ``module``, or a dotted import target) denotes."""
        if expr is None or hops > MAX_HOPS:
            return None
        if isinstance(expr, str):
            return self.lookup(expr, hops + 1)
        if isinstance(expr, ast.Constant):
            return expr.value if isinstance(expr.value, str) else None
        names = dotted(expr)
        bindings = self.modules[module].bindings
        if not names or names[0] not in bindings:
            return None
        bound = bindings[names[0]]
        if len(names) == 1:
            return self.value(module, bound, hops + 1)
        if not isinstance(bound, str):
            return None  # an attribute of a value (self.X, a class attribute): not a constant
        return self.lookup(".".join([bound, *names[1:]]), hops + 1)

    def lookup(self, qualified: str, hops: int) -> str | None:
        """The string constant ``workflows.module.NAME`` names (followed through re-exports)."""
        module, _, name = qualified.rpartition(".")
        if module not in self.modules or name not in self.modules[module].bindings:
            return None
        return self.value(module, self.modules[module].bindings[name], hops)


def local_names(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names a function binds itself (parameters, assignments, imports): they hide constants."""
    args = func.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    names = {a.arg for a in every if a is not None}
    body = func.body if isinstance(func.body, list) else [func.body]
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names


class CallFinder(ast.NodeVisitor):
    """Collects a module's patch calls, and any reference to the SDK's calls that is not one."""

    def __init__(self, mod: Module, resolver: Resolver) -> None:
        self.mod, self.resolver = mod, resolver
        self.scopes: list[set[str]] = []
        self.calls: set[int] = set()
        self.uses: list[Use] = []
        self.problems: list[str] = []

    def sdk_call(self, expr: ast.expr) -> str | None:
        """``patched`` or ``deprecate_patch`` when ``expr`` names the SDK's function."""
        names = dotted(expr)
        if not names or names[0] not in self.mod.imported:
            return None
        qualified = ".".join([self.mod.imported[names[0]], *names[1:]])
        call = qualified.removeprefix(SDK_MODULE + ".")
        return call if call in CALLS and qualified == f"{SDK_MODULE}.{call}" else None

    def visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.scopes.append(local_names(node))
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_function

    def visit_Call(self, node: ast.Call) -> None:
        call = self.sdk_call(node.func)
        if call is not None:
            self.calls.add(id(node.func))
            self.uses.append(self.use(node, call))
        self.generic_visit(node)

    def use(self, node: ast.Call, call: str) -> Use:
        where = f"{self.mod.path}:{node.lineno}"
        arg = (
            node.args[0]
            if node.args
            else next((k.value for k in node.keywords if k.arg == "id"), None)
        )
        if arg is None:
            return Use(where, call, None, "")
        names = dotted(arg)
        hidden = names is not None and any(names[0] in scope for scope in self.scopes)
        patch_id = None if hidden else self.resolver.value(self.mod.name, arg)
        return Use(where, call, patch_id, ast.unparse(arg))

    def visit_reference(self, node: ast.Name | ast.Attribute) -> None:
        call = self.sdk_call(node)
        if call is not None and id(node) not in self.calls:
            self.problems.append(
                f"{self.mod.path}:{node.lineno}: workflow.{call} is used other than as a direct "
                "call, so its ids cannot be checked: call it with the id"
            )
        self.generic_visit(node)

    visit_Name = visit_Attribute = visit_reference


def release(version: str) -> tuple[int, int, int] | None:
    """``"0.2.0"`` as ``(0, 2, 0)``; a pre-release (``0.2.0rc1``) counts as its release."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def find_uses(root: Path) -> tuple[list[Use], list[str]]:
    """Every patch call under ``workflows/``, and problems found while reading them."""
    paths = sorted((root / PACKAGE).rglob("*.py"))
    modules = {m.name: m for m in (load_module(root, p) for p in paths)}
    resolver = Resolver(modules)
    uses: list[Use] = []
    problems: list[str] = []
    for mod in modules.values():
        finder = CallFinder(mod, resolver)
        finder.visit(mod.tree)
        uses += finder.uses
        problems += finder.problems
    return uses, problems


def use_problems(use: Use, registry: dict[str, Entry], version: str) -> Iterator[str]:
    """What is wrong with one call, judged against the registry and the project's version."""
    head = f"{use.where}: workflow.{use.call}({use.source})"
    if use.patch_id is not None and use.source != repr(use.patch_id):
        head += f" (id {use.patch_id!r})"
    if use.patch_id is None:
        yield (
            f"{head}: the id is not a string literal or a top-level string constant of the "
            f"workflows package, so it cannot be checked against {REGISTRY}: name it as one"
            if use.source
            else f"{head}: no patch id"
        )
        return
    entry = registry.get(use.patch_id)
    if entry is None:
        needs = "deprecates" if use.call == "patched" else "removes"
        yield f"{head}: not listed in {REGISTRY}: add it with the release that {needs} it"
        return
    now, removed_in = release(version), entry.removed_in
    if use.call == "patched" and removed_in is not None:
        yield f"{head}: {REGISTRY} lists it as deprecated: call workflow.deprecate_patch"
    elif use.call == "deprecate_patch" and removed_in is None:
        yield f"{head}: {REGISTRY} gives no removed_in (the release that removes it): add one"
    elif use.call == "patched" and reached(now, entry.deprecated_in):
        yield (
            f"{head}: due for deprecation in {entry.deprecated_in} (this is {version}): call "
            "workflow.deprecate_patch and set removed_in, or delete it at a version cut"
        )
    elif use.call == "deprecate_patch" and reached(now, removed_in):
        yield f"{head}: due for removal in {removed_in} (this is {version}): delete the call"


def reached(now: tuple[int, int, int] | None, due: str | None) -> bool:
    """Whether the project's release ``now`` is ``due`` or later (never, if either is unknown)."""
    when = release(due) if due else None
    return now is not None and when is not None and now >= when


def registry_problems(registry: dict[str, Entry], used: set[str]) -> Iterator[str]:
    """Entries no workflow uses, and entries whose releases are not releases in order."""
    for patch_id, entry in sorted(registry.items()):
        name = f"{REGISTRY}: patch id {patch_id!r}"
        if patch_id not in used:
            yield f"{name} is listed but no workflow uses it: drop it"
        deprecated_in = release(entry.deprecated_in)
        removed_in = release(entry.removed_in) if entry.removed_in is not None else None
        if deprecated_in is None:
            yield f"{name}: deprecated_in {entry.deprecated_in!r} is not a release like 0.2.0"
        elif entry.removed_in is not None and (removed_in is None or removed_in <= deprecated_in):
            yield f"{name}: removed_in {entry.removed_in!r} is not a release after deprecated_in"


def check(root: Path) -> tuple[list[str], str]:
    """All problems of the tree at ``root`` (none when the registry holds), and a summary."""
    sys.path.insert(0, str(root))  # the registry of the tree checked, not of an installed copy
    registry: dict[str, Entry] = dict(importlib.import_module(f"{PACKAGE}.patches").PATCHES)
    version = str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])
    uses, problems = find_uses(root)
    for use in uses:
        problems += use_problems(use, registry, version)
    problems += registry_problems(registry, {u.patch_id for u in uses if u.patch_id})
    summary = (
        f"patches: {len({u.patch_id for u in uses})} ids at {len(uses)} call sites in "
        f"{PACKAGE}/, each listed in {REGISTRY} (release {version})"
    )
    return problems, summary


def main(argv: list[str] | None = None) -> int:
    """Check the tree at ROOT (default: this checkout); 0 if the registry holds, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    root = parser.parse_args(argv).root.resolve()
    problems, summary = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_patches: {len(problems)} problem(s); the lifecycle is in {REGISTRY}")
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
