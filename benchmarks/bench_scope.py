"""Benchmark: scope patterns at scale (issue 10, item 8) over one cluster of meta-24k (3,072 hosts).

Times what ``trainctl ops plan`` does with a long ``scope.hosts`` list: the scope filter alone
(every host through the zone/rack/host patterns, then the check that every pattern matched) and
the whole pure plan. Each figure is the best of ``--repeat`` runs; patterns per second are those
of the scope filter, and each plan is also given as a ratio to a baseline measured in the same
run: the same plan over the same cluster with no host patterns (``scope: {cluster: c00}``). The
straightforward filter (fnmatch of every pattern against every host, as before) is timed on the
smallest case for comparison.

    python benchmarks/bench_scope.py [--preset meta-24k] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any, TypeVar

from orchestrator.contracts.ops_spec import OperationSpec, Scope
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import get_preset
from orchestrator.ops import parse_spec_text
from orchestrator.planning.ops_plan import plan_operation
from orchestrator.planning.ops_scope import ScopeFilter

T = TypeVar("T")
CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    assert out is not None
    return best, out


class Straightforward:
    """The filter as it was: each pattern fnmatched against every (uncached) name."""

    def __init__(self, scope: Scope) -> None:
        self.patterns = scope.hosts or []
        self.hit: set[int] = set()

    def hosts(self, snap: ClusterSnapshot) -> list[HostView]:
        out = []
        for h in snap.hosts:
            short = h.name.removeprefix(snap.name + "-")
            found = [
                i
                for i, p in enumerate(self.patterns)
                if fnmatchcase(h.name, p) or fnmatchcase(short, p)
            ]
            self.hit.update(found)
            if found:
                out.append(h)
        return out

    def check(self, clusters: Iterable[str]) -> None:
        for i, p in enumerate(self.patterns):
            if i not in self.hit:
                raise ValueError(f"scope.hosts: {p!r} matches nothing")


# ------------------------------------------------------------------------------ the cases
def _glob(name: str, rnd: random.Random) -> str:
    """A glob that matches host ``name`` (and maybe neighbours): one to three of its characters
    after ``c00-`` turned into ``?``, the cluster prefix dropped, or a star at one end."""
    chars = list(name)
    for i in rnd.sample(range(4, len(name)), rnd.randrange(1, 4)):
        chars[i] = "?"
    glob = "".join(chars)
    return rnd.choice([glob, glob, glob[4:], "*" + glob[rnd.randrange(5, 12) :], glob[:-3] + "*"])


def _bracket(name: str, rnd: random.Random) -> str:
    """A glob with a set that matches host ``name``: one of its characters as ``[7x]``,
    ``[!x]`` or ``[0-9]`` (when a digit), and maybe a ``?`` elsewhere."""
    i, j = rnd.sample(range(5, len(name)), 2)
    sets = [f"[{name[i]}x]", "[!x]"] + (["[0-9]"] if name[i].isdigit() else [])
    chars = list(name)
    chars[i] = rnd.choice(sets)
    chars[j] = rnd.choice([chars[j], "?"])
    return "".join(chars)


def cases(snap: ClusterSnapshot, rnd: random.Random) -> dict[str, list[str]]:
    names = [h.name for h in snap.hosts]
    forms = names + [n[4:] for n in names]
    globs = [_glob(rnd.choice(names), rnd) for _ in range(100_000)]
    return {
        "1,000 globs": globs[:1_000],
        "10,000 globs": globs[:10_000],
        "40,000 globs": globs[:40_000],
        "100,000 globs (the limit)": globs,
        "40,000 literals + 1,000 globs": [forms[i % len(forms)] for i in range(40_000)]
        + globs[:1_000],
        "40,000 globs with [sets]": [_bracket(rnd.choice(names), rnd) for _ in range(40_000)],
        "6,144 globs *...* (no literal ends)": [f"*{f[4:]}*" for f in names]
        + [f"*{f[4:-1]}?" for f in names],
    }


def scope_only(
    spec: OperationSpec, snaps: dict[str, ClusterSnapshot], cls: type[Any] = ScopeFilter
) -> int:
    """Hosts in scope: every host through the filter, then its check."""
    f = cls(spec.scope)
    n = sum(len(f.hosts(snap)) for snap in snaps.values())
    f.check(snaps)
    return n


def run(preset_name: str, seed: int, repeat: int) -> dict[str, Any]:
    snap = build_cluster(get_preset(preset_name), seed).snapshot()
    snaps = {snap.name: snap}

    plan = functools.partial(plan_operation, clusters=snaps)
    base = parse_spec_text(json.dumps({"scope": {"cluster": snap.name}, "targets": CUDA}))
    baseline_s, base_plan = best_of(repeat, functools.partial(plan, base))
    out: dict[str, Any] = {
        "preset": preset_name,
        "hosts": len(snap.hosts),
        "baseline": "plan_operation with no host patterns",
        "baseline_seconds": round(baseline_s, 4),
        "cases": {},
    }
    for label, hosts in cases(snap, random.Random(seed)).items():
        text = json.dumps({"scope": {"cluster": snap.name, "hosts": hosts}, "targets": CUDA})
        parse_s, spec = best_of(repeat, functools.partial(parse_spec_text, text))
        scope_s, in_scope = best_of(repeat, functools.partial(scope_only, spec, snaps))
        plan_s, result = best_of(repeat, functools.partial(plan, spec))
        row = {
            "patterns": len(hosts),
            "spec_bytes": len(text),
            "hosts_in_scope": in_scope,
            "waves": len(result.waves),
            "parse_json_seconds": round(parse_s, 4),
            "scope_seconds": round(scope_s, 4),
            "patterns_per_second": round(len(hosts) / scope_s),
            "plan_seconds": round(plan_s, 4),
            "plan_x_baseline": round(plan_s / baseline_s, 2),
        }
        if len(hosts) <= 1_000:
            ref_s, ref_n = best_of(1, functools.partial(scope_only, spec, snaps, Straightforward))
            assert ref_n == in_scope
            row["straightforward_scope_seconds"] = round(ref_s, 3)
            row["speedup_over_straightforward"] = round(ref_s / scope_s, 1)
        out["cases"][label] = row
    assert base_plan.refused is None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="meta-24k")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()
    out = run(args.preset, args.seed, max(1, args.repeat))
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"{out['preset']} c00: {out['hosts']:,} hosts; baseline ({out['baseline']}) "
        f"{out['baseline_seconds']:.3f} s"
    )
    head = f"{'host patterns':<40} {'in scope':>8} {'scope s':>8} {'patterns/s':>11} "
    print(head + f"{'plan s':>7} {'x baseline':>10} {'parse s':>8}")
    for label, r in out["cases"].items():
        print(
            f"{label:<40} {r['hosts_in_scope']:>8,} {r['scope_seconds']:>8.3f} "
            f"{r['patterns_per_second']:>11,} {r['plan_seconds']:>7.3f} "
            f"{r['plan_x_baseline']:>10.2f} {r['parse_json_seconds']:>8.3f}"
        )
        if "straightforward_scope_seconds" in r:
            print(
                f"{'  (straightforward fnmatch filter)':<40} {'':>8} "
                f"{r['straightforward_scope_seconds']:>8.3f}  "
                f"-> {r['speedup_over_straightforward']:,}x faster now"
            )


if __name__ == "__main__":
    main()
