"""Reference runs: six `trainctl simulate` commands whose results must not change by accident.

A restructuring that claims "no behaviour change" proves it here: each command's JSON result,
wall times left out, is committed in ``reference_runs.json`` beside this script with its hash,
and a new run is compared with it over the keys the recorded result had, at every depth. Keys
added later (a new figure appended to the result, or to a cluster's row) do not move a run; a
changed value of a recorded key does, and the check names the first path that moved.

    python benchmarks/reference_runs.py            # check: exit 1 naming every run that moved
    python benchmarks/reference_runs.py --record   # after an intended change: record anew
    python benchmarks/reference_runs.py --json     # one object: per run, recorded vs now

About 15 s on this machine (meta-24k dominates). Outside CI: a deliberate behaviour change
re-records, and says so in its commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORD = HERE / "reference_runs.json"
ENTRY = "from orchestrator.app.cli import entrypoint; entrypoint()"

#: The six runs: the presets and policies whose figures the README and the issues quote.
RUNS: dict[str, list[str]] = {
    "small-job-aware": ["--preset", "small", "--policy", "job-aware", "--seed", "1"],
    "small-rolling-serial": ["--preset", "small", "--policy", "rolling-serial", "--seed", "1"],
    "multi-job-aware": ["--preset", "multi", "--policy", "job-aware", "--seed", "1"],
    "meta24k-job-aware-s1": ["--preset", "meta-24k", "--policy", "job-aware", "--seed", "1"],
    "meta24k-drain-wait-s2": ["--preset", "meta-24k", "--policy", "drain-wait", "--seed", "2"],
    "meta24k-cycle-target-s1": [
        "--preset",
        "meta-24k",
        "--policy",
        "job-aware",
        "--seed",
        "1",
        "--cycle-target",
        "63h",
    ],
}
#: Keys that measure this machine, not the schedule.
WALL_KEYS = frozenset({"wall_seconds", "wall_seconds_total", "cluster_wall_seconds"})


def _strip(obj: Any) -> Any:
    """The result without wall-time keys, at any depth."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in WALL_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def run(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "simulate", *args, "--json"],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"simulate {' '.join(args)} failed: {done.stderr[-500:]}")
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def project(now: Any, shape: Any) -> Any:
    """``now`` cut to the keys ``shape`` has, at every depth (later additions left out)."""
    if isinstance(shape, dict) and isinstance(now, dict):
        return {k: project(now.get(k), v) for k, v in shape.items()}
    if isinstance(shape, list) and isinstance(now, list) and len(shape) == len(now):
        return [project(n, s) for n, s in zip(now, shape, strict=True)]
    return now


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """The first path where ``a`` and ``b`` differ ('' when they do not)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            found = first_difference(a[k], b.get(k), f"{path}.{k}" if path else k)
            if found:
                return found
        return ""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return ""
    return "" if a == b else f"{path}: {a!r} -> {b!r}"


def digest(result: Any) -> str:
    """sha256 of a result in canonical JSON."""
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--record", action="store_true", help="record the hashes anew")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    opts = ap.parse_args()
    recorded: dict[str, Any] = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    report: dict[str, Any] = {}
    moved = []
    for name, args in RUNS.items():
        result = _strip(run(args))
        if opts.record or name not in recorded:
            recorded[name] = {"args": args, "sha256": digest(result), "result": result}
        entry = recorded[name]
        now = project(result, entry["result"])
        moved_at = first_difference(entry["result"], now)
        report[name] = {"recorded": entry["sha256"], "now": digest(now), "moved": moved_at}
        if moved_at:
            moved.append(name)
        if not opts.json:
            said = f"MOVED at {moved_at}" if moved_at else "same"
            print(f"{name}: {said}  (simulate {' '.join(args)})")
    if opts.record:
        RECORD.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    if opts.json:
        print(json.dumps({"runs": report, "moved": moved}))
    elif moved:
        print(f"{len(moved)} reference run(s) moved: {', '.join(moved)}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
