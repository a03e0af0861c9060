"""Scope patterns at scale (issue 10, item 8): the same plans as fnmatch against every host, in
near-linear time, and the documented limits on spec size and pattern count (exit 2 past them)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase, translate
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.contracts.ops_spec import MAX_SCOPE_PATTERNS, OperationSpec, Scope, load_spec
from orchestrator.contracts.specs import MAX_SPEC_BYTES, SpecError
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import PRESETS, get_preset
from orchestrator.ops import parse_spec_text
from orchestrator.planning import ops_plan, scope_patterns
from orchestrator.planning.glob_match import glob_matcher, glob_tokens, longest_literal_run
from orchestrator.planning.ops_plan import plan_operation
from orchestrator.planning.ops_scope import ScopeFilter

CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}
#: Two clusters shaped like ``small`` (128 hosts each: 2 zones of 8 racks of 8 hosts).
DUO = PRESETS["small"].model_copy(update={"name": "duo", "clusters": 2})


class ReferenceScope:
    """The straightforward filter (as it was before): every pattern against every name."""

    def __init__(self, scope: Scope) -> None:
        self.lists = {"zones": scope.zones, "racks": scope.racks, "hosts": scope.hosts}
        self.hits: dict[str, set[int]] = {k: set() for k in self.lists}
        self._cache: dict[tuple[str, str], bool] = {}

    def _ok(self, field: str, name: str, cluster: str) -> bool:
        patterns = self.lists[field]
        if patterns is None:
            return True
        key = (field, name)
        if key not in self._cache:
            short = name.removeprefix(cluster + "-")
            found = [
                i for i, p in enumerate(patterns) if fnmatchcase(name, p) or fnmatchcase(short, p)
            ]
            self.hits[field].update(found)
            self._cache[key] = bool(found)
        return self._cache[key]

    def hosts(self, snap: ClusterSnapshot) -> list[HostView]:
        return [
            h
            for h in snap.hosts
            if self._ok("zones", h.zone, snap.name)
            and self._ok("racks", h.rack, snap.name)
            and self._ok("hosts", h.name, snap.name)
        ]

    def check(self, clusters: Iterable[str]) -> None:
        for field, patterns in self.lists.items():
            for i, p in enumerate(patterns or ()):
                if i not in self.hits[field]:
                    where = ", ".join(sorted(clusters))
                    raise ValueError(f"scope.{field}: {p!r} matches nothing in {where}")


def outcome(filter_cls: type[Any], scope: Scope, snaps: Mapping[str, ClusterSnapshot]) -> Any:
    """Hosts in scope per cluster and the check's error, as plan_operation uses the filter."""
    f = filter_cls(scope)
    hosts = {name: [h.name for h in f.hosts(snap)] for name, snap in sorted(snaps.items())}
    try:
        f.check(snaps)
    except ValueError as err:
        return hosts, str(err)
    return hosts, None


@pytest.fixture(scope="module")
def duo() -> dict[str, ClusterSnapshot]:
    return {c: build_cluster(DUO, 3, c).snapshot() for c in DUO.cluster_names()}


@pytest.fixture(scope="module")
def meta24k() -> ClusterSnapshot:
    return build_cluster(get_preset("meta-24k"), 1).snapshot()


# ----------------------------------------------------------------------- same as fnmatch
def _mutate(name: str, rnd: random.Random) -> str:
    """A glob made from a name: characters turned into ?, [..] or *, a typo, a star at an end."""
    chars = list(name)
    for _ in range(rnd.randrange(1, 4)):
        i = rnd.randrange(len(chars))
        c = chars[i]
        chars[i] = rnd.choice(
            [
                "?",
                "*",
                "**",
                f"[{c}x]",
                f"[!{c}]",
                "[!x]",
                "[0-3]",
                "[]",
                "[",
                "]",
                "x",
                c + "*",
                "*" + c,
                "!",
            ]
        )
    glob = "".join(chars)
    return rnd.choice([glob, glob, "*" + glob[rnd.randrange(len(glob)) :], glob[:3] + "*"])


def _patterns(names: list[str], cluster: str, rnd: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        name = rnd.choice(names)
        short = name.removeprefix(cluster + "-")
        kind = rnd.random()
        if kind < 0.3:
            out.append(rnd.choice([name, short]))  # a literal
        elif kind < 0.35:
            out.append(short + "9")  # a literal that matches nothing
        else:
            out.append(_mutate(rnd.choice([name, short]), rnd))
    return out


def test_globs_match_exactly_as_fnmatchcase() -> None:
    """Every glob the filter builds answers as fnmatchcase on names made of its characters;
    its tokens spell it, and every name it matches holds its longest literal run."""
    rnd = random.Random(5)
    texts = ["".join(rnd.choice("ab-0]![") for _ in range(rnd.randrange(7))) for _ in range(200)]
    for _ in range(1500):
        glob = "".join(rnd.choice("ab-?*[]!0") for _ in range(rnd.randrange(1, 8)))
        match = glob_matcher(glob)
        tokens = glob_tokens(glob)
        assert "".join(tokens) == glob
        run = longest_literal_run(tokens)
        for text in texts:
            assert bool(match(text)) == fnmatchcase(text, glob), (glob, text)
            if fnmatchcase(text, glob):
                assert run in text


def _names_snapshot(names: list[str]) -> ClusterSnapshot:
    hosts = tuple(HostView(name=n, rack="a-r", zone="a-z", state="in_service") for n in names)
    return ClusterSnapshot(name="a", now=0.0, hosts_total=len(hosts), hosts=hosts, jobs={})


@pytest.mark.parametrize("seed", range(2))
def test_many_random_globs_over_random_names_as_the_reference(seed: int) -> None:
    """Hundreds of random globs at once (shapes, inner text, combined regexes all in play) over
    random names: the same names in scope and the same first pattern matching nothing."""
    rnd = random.Random(seed)
    names = sorted(
        {"".join(rnd.choice("ab-0]!") for _ in range(rnd.randrange(1, 9))) for _ in range(300)}
    )
    names += ["a-" + n for n in names[:50]]  # with a short name after the cluster "a"
    snap = _names_snapshot(names)
    for _ in range(3):
        globs = [
            "".join(rnd.choice("ab-?*[]!0") for _ in range(rnd.randrange(1, 9))) for _ in range(300)
        ]
        scope = Scope(cluster="a", hosts=globs)
        got = outcome(ScopeFilter, scope, {"a": snap})
        assert got == outcome(ReferenceScope, scope, {"a": snap})
        matching = [g for g in globs if any(fnmatchcase(n, g) for n in names)]
        scope = Scope(cluster="a", hosts=matching)  # every one matches: no early error
        got = outcome(ScopeFilter, scope, {"a": snap})
        assert got == outcome(ReferenceScope, scope, {"a": snap}) and got[1] is None


@pytest.mark.parametrize(("seed", "few", "chunk"), [(s, 16, 256) for s in range(4)] + [(9, 0, 3)])
def test_same_hosts_and_errors_as_the_reference(
    duo: dict[str, ClusterSnapshot],
    seed: int,
    few: int,
    chunk: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random mixes of literals and globs (zones, racks, hosts, two clusters): the same hosts in
    scope and the same error, naming the field and the first pattern that matches nothing (also
    with every group of globs matched through combined regexes of 3)."""
    monkeypatch.setattr(scope_patterns, "_FEW", few)
    monkeypatch.setattr(scope_patterns, "_CHUNK", chunk)
    rnd = random.Random(seed)
    snaps = list(duo.values())
    errors = 0
    for trial in range(60):
        snap = rnd.choice(snaps)
        lists: dict[str, list[str]] = {}
        for field, attr, n in (("zones", "zone", 3), ("racks", "rack", 6), ("hosts", "name", 12)):
            if rnd.random() < 0.6:
                names = sorted({getattr(h, attr) for h in snap.hosts})
                lists[field] = _patterns(names, snap.name, rnd, rnd.randrange(1, n + 1))
        scope = Scope(cluster="c0*", **lists)
        clusters = duo if trial % 2 else {snap.name: snap}
        got = outcome(ScopeFilter, scope, clusters)
        assert got == outcome(ReferenceScope, scope, clusters), scope
        errors += got[1] is not None
    assert 0 < errors < 60  # both outcomes were exercised


def test_host_patterns_only_count_where_zone_and_rack_passed(
    duo: dict[str, ClusterSnapshot],
) -> None:
    """A host pattern that matches only hosts outside the zones is a pattern matching nothing."""
    scope = Scope(cluster="c00", zones=["z00"], hosts=["z00-r000-h0?", "c00-z01-r00[0-9]-h01"])
    _, error = outcome(ScopeFilter, scope, {"c00": duo["c00"]})
    assert error == "scope.hosts: 'c00-z01-r00[0-9]-h01' matches nothing in c00"
    assert outcome(ReferenceScope, scope, {"c00": duo["c00"]})[1] == error


@pytest.mark.parametrize(
    "scope",
    [
        {"cluster": "c0*", "hosts": ["c00-z00-r000-h0?", "z01-r00[3-5]-*", "c01-z00-r001-h03"]},
        {"cluster": "c0*", "racks": ["z00-r00?", "c01-z01-r010"], "hosts": ["*-h0[0-3]", "*h07"]},
        {"cluster": "c00", "zones": ["z0*"], "racks": ["*r00[!2]"], "hosts": ["*"]},
        {"cluster": "c0*", "hosts": ["z00-r000-h00", "z00-r000-h0x"]},
        {"cluster": "c01", "racks": ["c00-z00-r000"]},
    ],
)
def test_plans_are_the_same_as_with_the_reference(
    duo: dict[str, ClusterSnapshot], scope: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole plans (or the error) over both clusters are the same as with the reference filter."""
    spec = OperationSpec.model_validate({"scope": scope, "targets": CUDA})
    snaps = {c: duo[c] for c in duo if fnmatchcase(c, scope["cluster"])}

    def plan() -> Any:
        try:
            return plan_operation(spec, snaps).model_dump(mode="json")
        except ValueError as err:
            return str(err)

    got = plan()
    monkeypatch.setattr(ops_plan, "ScopeFilter", ReferenceScope)
    assert got == plan()


# ---------------------------------------------------------------------------------- scale
def _big_scope(snap: ClusterSnapshot, rnd: random.Random) -> tuple[list[str], list[str]]:
    """40,000 host literals (full and short names, repeated) of zones z00..z05, and 1,000 globs
    made from hosts of any zone."""
    names = [h.name for h in snap.hosts]
    low = [n for n in names if n < "c00-z06"]
    forms = [f for n in low for f in (n, n.removeprefix("c00-"))]
    literals = [forms[i % len(forms)] for i in range(40_000)]
    globs = []
    for i in range(1_000):
        name = rnd.choice(names)
        rack, host = name[:12], name[-2:]  # c00-z02-r010, 07
        short = rack.removeprefix("c00-")
        globs.append(
            [
                f"{rack}-h{host[0]}?",
                f"{short}-h?{host[1]}",
                f"*-{short[4:]}-h{host}",
                f"c00-z??-{rack[8:]}-h[{host[0]}]{host[1]}",
                f"{rack[:7]}-r0[0-1]?-*{host[1]}",
                f"{short[:3]}*-h{host}",
            ][i % 6]
        )
    return literals, globs


def test_40k_literals_and_1k_globs_over_meta_24k(meta24k: ClusterSnapshot) -> None:
    """The issue's stall: 41,000 host patterns over 3,072 hosts plan, and cover exactly the
    hosts the patterns name (an independent oracle: one regex of all the globs)."""
    literals, globs = _big_scope(meta24k, random.Random(8))
    spec = parse_spec_text(
        json.dumps({"scope": {"cluster": "c00", "hosts": literals + globs}, "targets": CUDA})
    )
    plan = plan_operation(spec, {"c00": meta24k})

    oracle = re.compile("|".join(translate(g) for g in globs))
    named = set(literals)
    expected = {
        h.name
        for h in meta24k.hosts
        if {h.name, h.name[4:]} & named or oracle.match(h.name) or oracle.match(h.name[4:])
    }
    listed = [h for w in plan.waves for h in w.hosts] + plan.already_done + plan.deferred
    assert plan.refused is None
    assert sorted(listed) == sorted(expected) and plan.hosts_total == len(expected)
    assert 6 * 384 < len(expected) < 3072  # literals took zones z00..z05, globs some of z06/z07


def test_40k_distinct_globs_over_meta_24k(meta24k: ClusterSnapshot) -> None:
    """The issue's 40,000 globs (past fnmatch's cache of 32,768): each made from a host by
    turning characters into ``?`` or an end into ``*``, so every host is in scope."""
    rnd = random.Random(4)
    names = [h.name for h in meta24k.hosts]
    globs: set[str] = set()
    while len(globs) < 40_000:
        chars = list(rnd.choice(names))
        for i in rnd.sample(range(4, len(chars)), rnd.randrange(1, 4)):
            chars[i] = "?"
        glob = "".join(chars)
        globs.add(rnd.choice([glob, glob[4:], "*" + glob[rnd.randrange(5, 12) :], glob[:-3] + "*"]))
    hosts = sorted(globs)
    spec = OperationSpec.model_validate(
        {"scope": {"cluster": "c00", "hosts": hosts}, "targets": CUDA}
    )
    assert plan_operation(spec, {"c00": meta24k}).hosts_total == 3072


def test_40k_patterns_with_ones_matching_nothing_name_the_first(meta24k: ClusterSnapshot) -> None:
    """In a scope of 41,000 patterns the first that matches nothing (list order) is named."""
    literals, globs = _big_scope(meta24k, random.Random(9))
    hosts = literals + globs
    hosts[30_000] = "c00-z0[89]-r000-h00"  # a glob of zones that do not exist
    hosts[35_000] = "c00-z07-r024-h00"  # a literal typo: racks go up to r023
    spec = OperationSpec.model_validate(
        {"scope": {"cluster": "c00", "hosts": hosts}, "targets": CUDA}
    )
    with pytest.raises(ValueError, match=r"^scope\.hosts: 'c00-z0\[89\]-r000-h00' matches nothing"):
        plan_operation(spec, {"c00": meta24k})
    hosts[30_000] = "z07-r023-h15"
    spec = OperationSpec.model_validate(
        {"scope": {"cluster": "c00", "hosts": hosts}, "targets": CUDA}
    )
    with pytest.raises(ValueError, match=r"^scope\.hosts: 'c00-z07-r024-h00' matches nothing"):
        plan_operation(spec, {"c00": meta24k})


def test_many_zone_and_rack_globs(meta24k: ClusterSnapshot) -> None:
    """Zone and rack lists scale the same way (each name is tried once)."""
    # odd racks of zones z00..z04 by literal, even ones by glob: all 120 racks of those zones
    odd = [f"z0{z}-r0{r:02d}" for z in range(5) for r in range(1, 24, 2)]
    even = [f"c00-z0{z}-r0?{d}" for z in range(5) for d in range(0, 10, 2)]
    racks = [(odd + even)[i % 85] for i in range(20_000)]
    scope = Scope(cluster="c00", zones=["z0[0-3]", "c00-z04"] * 5_000, racks=racks)
    got_hosts, error = outcome(ScopeFilter, scope, {"c00": meta24k})
    assert error is None
    assert len(got_hosts["c00"]) == 5 * 24 * 16


# --------------------------------------------------------------------------------- limits
def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_spec_over_the_byte_limit_is_refused_naming_the_file(tmp_home: Path) -> None:
    """A spec document over 4 MiB is refused before it is parsed: exit 2 naming the file."""
    big = tmp_home / "big.json"
    spec = {"scope": {"cluster": "c00", "hosts": ["c00-z00-r000-h00"]}, "targets": CUDA}
    big.write_text(json.dumps(spec) + " " * MAX_SPEC_BYTES)
    with pytest.raises(SpecError, match=r"big\.json is 4,194,\d{3} bytes, over the 4 MiB limit"):
        load_spec(big)
    result = run("ops", "plan", "--spec", str(big), "--json")
    assert result.exit_code == 2, result.output
    assert "4 MiB" in json.loads(result.stdout)["error"]
    with pytest.raises(SpecError, match="the input is .* over the 4 MiB limit"):
        parse_spec_text("é" * (MAX_SPEC_BYTES // 2 + 1))
    big.write_text(json.dumps(spec) + " " * (MAX_SPEC_BYTES - 200))  # just under: fine
    assert load_spec(big).scope.hosts == ["c00-z00-r000-h00"]


def test_scope_over_the_pattern_limit_is_refused_naming_the_field(tmp_home: Path) -> None:
    """More than 100,000 entries in a scope list: exit 2 naming ``scope.hosts``."""
    path = tmp_home / "many.json"
    hosts = ["c00-z00-r000-h00"] * (MAX_SCOPE_PATTERNS + 1)
    path.write_text(json.dumps({"scope": {"cluster": "c00", "hosts": hosts}, "targets": CUDA}))
    with pytest.raises(
        SpecError, match=r"^scope\.hosts: 100,001 entries, over the limit of 100,000"
    ):
        load_spec(path)
    result = run("ops", "plan", "--spec", str(path), "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["field"] == "scope.hosts"
    with pytest.raises(ValueError, match=r"scope\.racks: 100,001 entries"):
        OperationSpec.model_validate({"scope": {"cluster": "c00", "racks": hosts}})
    ok = {"scope": {"cluster": "c00", "zones": ["z00"] * MAX_SCOPE_PATTERNS}, "targets": CUDA}
    assert len(parse_spec_text(json.dumps(ok)).scope.zones or ()) == MAX_SCOPE_PATTERNS


def test_schema_documents_the_limits() -> None:
    """`ops schema` shows the limits: maxItems on each scope list, 4 MiB in the descriptions."""
    result = run("ops", "schema")
    schema = json.loads(result.stdout)
    scope = schema["$defs"]["Scope"]["properties"]
    for field in ("zones", "racks", "hosts"):
        array = next(s for s in scope[field]["anyOf"] if s.get("type") == "array")
        assert array["maxItems"] == MAX_SCOPE_PATTERNS
        assert "100,000" in scope[field]["description"] and "4 MiB" in scope[field]["description"]
    assert "4 MiB" in schema["description"]
