"""How fast the simulated fleet builds, answers topology queries and runs a month of fleet time.

Run ``python benchmarks/bench_fleet.py``. Every figure comes with a baseline measured in the same
run on the same machine, so the ratios travel between machines where the seconds do not:

- building ``meta-600k`` against 25x the ``meta-24k`` build (what linear scaling would cost);
- each topology query (blast radius of a rack switch and of a zone, a host's failure domains,
  a host's cluster ordered by closeness) against the same answer computed naively by walking the
  same networkx graph (``nx.descendants``; for failure domains ``nx.ancestors``, which is
  descendants on the reversed graph);
- advancing ``meta-24k`` through 30 fleet days (jobs, checkpoints, failures, repairs) in one
  transaction, next to the fleet hours it covers.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import networkx as nx

from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import PRESETS
from orchestrator.fleet.topology import Topology

ANCHOR = datetime(2025, 1, 1, tzinfo=UTC)
SAMPLES = 200


def seconds(fn: Callable[[], Any], repeat: int = 1) -> float:
    """Best wall time of ``repeat`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def per_call_us(fn: Callable[[str], Any], inputs: Sequence[str], rounds: int = 3) -> float:
    """Microseconds per call of ``fn`` over ``inputs`` (best of ``rounds`` passes)."""
    return seconds(lambda: [fn(x) for x in inputs], rounds) / len(inputs) * 1e6


def naive_queries(topo: Topology) -> dict[str, Callable[[str], Any]]:
    """The same four answers as Topology gives, by walking the graph on every call."""
    g = topo.graph
    kind = nx.get_node_attributes(g, "kind")
    index = {h: i for i, h in enumerate(topo.hosts)}

    def hosts_below(node: str) -> list[str]:
        return sorted(
            (n for n in nx.descendants(g, node) if kind[n] == "host"), key=index.__getitem__
        )

    def failure_domains(host: str) -> dict[str, str]:
        up = {kind[n]: n for n in nx.ancestors(g, host) if kind[n] in ("cluster", "zone", "rack")}
        return {"cluster": up["cluster"], "zone": up["zone"], "rack": up["rack"]}

    def close_hosts(host: str) -> list[str]:
        dom = failure_domains(host)
        rack, zone = set(hosts_below(dom["rack"])), set(hosts_below(dom["zone"]))
        pool = [h for h in hosts_below(dom["cluster"]) if h != host]
        return sorted(pool, key=lambda h: (0 if h in rack else 1 if h in zone else 2, index[h]))

    return {
        "hosts_below": hosts_below,
        "failure_domains": failure_domains,
        "close_hosts": close_hosts,
    }


def main() -> None:
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        t24 = seconds(
            lambda: SqliteFleet.create(
                d / "m24.db", PRESETS["meta-24k"], 1, 1.0, wall=ANCHOR
            ).close(),
            repeat=3,
        )
        t600 = seconds(
            lambda: SqliteFleet.create(
                d / "m600.db", PRESETS["meta-600k"], 1, 1.0, wall=ANCHOR
            ).close()
        )
        rows.append(("build meta-24k (3,072 hosts)", f"{t24:.3f} s", "", ""))
        rows.append(
            (
                "build meta-600k (76,800 hosts)",
                f"{t600:.3f} s",
                f"25 x meta-24k = {25 * t24:.3f} s",
                f"{t600 / (25 * t24):.2f}",
            )
        )

        fleet = SqliteFleet.create(d / "month.db", PRESETS["meta-24k"], 1, 1.0, wall=ANCHOR)
        t0 = time.perf_counter()
        with fleet.cluster("c00", ANCHOR + timedelta(days=30)) as sim:
            fleet_hours = sim.now
        t_month = time.perf_counter() - t0
        events = sum(1 for _ in fleet.events())
        fleet.close()

    preset = PRESETS["meta-600k"]
    t_topo = seconds(lambda: Topology(preset))
    rows.append(("Topology(meta-600k) build", f"{t_topo:.3f} s", "", ""))

    topo = Topology(preset)
    naive = naive_queries(topo)
    r = random.Random(1)
    hosts = r.sample(topo.hosts, SAMPLES)
    rack_switches = r.sample([s for s, tier, _ in topo.switches if tier == "rack"], SAMPLES)
    zones = sorted({topo.failure_domains(h)["zone"] for h in topo.hosts})
    zones = r.sample(zones, min(SAMPLES, len(zones)))
    few = hosts[:20]  # close_hosts sorts a whole cluster: fewer samples suffice
    queries: list[tuple[str, Callable[[str], Any], Callable[[str], Any], Sequence[str]]] = [
        ("hosts_below(rack switch)", topo.hosts_below, naive["hosts_below"], rack_switches),
        ("hosts_below(zone)", topo.hosts_below, naive["hosts_below"], zones),
        ("failure_domains(host)", topo.failure_domains, naive["failure_domains"], hosts),
        ("close_hosts(host), its cluster", topo.close_hosts, naive["close_hosts"], few),
    ]
    for label, fast, slow, inputs in queries:
        assert all(fast(x) == slow(x) for x in inputs[:5]), label  # same answers, or no contest
        us, base = per_call_us(fast, inputs), per_call_us(slow, inputs)
        rows.append((label, f"{us:,.2f} us", f"networkx walk {base:,.1f} us", f"{us / base:.4f}"))

    rows.append(
        (
            "advance meta-24k 30 fleet days",
            f"{t_month:.3f} s",
            f"{fleet_hours:.0f} fleet h, {events:,} events",
            f"{fleet_hours / t_month:,.0f} fleet h/s",
        )
    )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    header = ("measure", "value", "baseline (same run)", "ratio")
    widths = [max(w, len(h)) for w, h in zip(widths, header, strict=True)]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print("\nratio = value / baseline (below 1: faster than the baseline)")


if __name__ == "__main__":
    main()
