"""The fleet store's transactions, SQLite beside PostgreSQL: what one activity's step costs.

    python benchmarks/bench_store.py                       # SQLite only (a temporary file)
    python benchmarks/bench_store.py --pg postgresql://USER@HOST:PORT/DB   # and PostgreSQL
                                                           # (an empty database; PGPASSWORD)

For each store and preset: building the fleet, a cordon-and-release transaction on one cluster
(load, advance, change, save, append: what every fleet activity does), a peek (a read of one
cluster), and a read of the whole record, in milliseconds per call (the
median of three runs), with the statements each write transaction sends. Outside CI; the
figures move with the machine's load, the ratios less.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import event

from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset

ROUNDS = 200


def _ms(fn: Callable[[int], object], n: int) -> float:
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        runs.append((time.perf_counter() - t0) * 1000 / n)
    return statistics.median(runs)


def bench(where: Path | str, preset: str) -> dict[str, float]:
    t0 = time.perf_counter()
    fleet = SqliteFleet.create(where, get_preset(preset), 1, 1.0)  # real time: no catching up
    built = time.perf_counter() - t0
    c = fleet.cluster_names()[0]
    names = list(fleet.peek(c).host_names())
    statements = [0]
    event.listen(
        fleet.db.engine,
        "before_cursor_execute",
        lambda *a: statements.__setitem__(0, statements[0] + 1),
    )

    def tx(i: int) -> None:
        with fleet.cluster(c) as b:
            h = names[i % len(names)]
            if b.cordon(h, "train-bench", "bench", limit=len(names)):
                b.release(h, "bench")

    out = {"build_s": built, "tx_ms": _ms(tx, ROUNDS)}
    out["statements_per_tx"] = statements[0] / (3 * ROUNDS)
    out["peek_ms"] = _ms(lambda i: fleet.peek(c), ROUNDS)
    t0 = time.perf_counter()
    out["records"] = sum(1 for _ in fleet.records())
    out["read_record_ms"] = (time.perf_counter() - t0) * 1000
    fleet.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pg", help="an empty PostgreSQL database (its fleet is replaced)")
    ap.add_argument("--preset", action="append", help="presets (default small, multi)")
    args = ap.parse_args()
    stores: list[tuple[str, Path | str]] = [("sqlite", Path(tempfile.mkdtemp()) / "fleet.db")]
    if args.pg:
        stores.append(("postgresql", args.pg))
    for preset in args.preset or ["small", "multi"]:
        for name, where in stores:
            r = bench(where, preset)
            print(
                f"{preset:8} {name:10} build {r['build_s']:.2f}s  tx {r['tx_ms']:.2f}ms "
                f"({r['statements_per_tx']:.0f} statements)  peek {r['peek_ms']:.2f}ms  "
                f"record {r['records']} in "
                f"{r['read_record_ms']:.0f}ms"
            )


if __name__ == "__main__":
    main()
