"""Prometheus metrics of the daemon, all prefixed ``trainctl_``.

Counters are incremented by activities as things happen (visits, quarantines, evictions, failed
updates); gauges of the fleet (hosts by state, hosts in maintenance, budget in use) are read from
the fleet on each scrape by a collector, so every worker reports the same truth.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, Counter, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

VISITS = Counter("trainctl_host_visits", "Hosts updated, verified and returned", ["cluster"])
QUARANTINES = Counter("trainctl_host_quarantines", "Hosts quarantined by maintenance", ["cluster"])
JOBS_INTERRUPTED = Counter("trainctl_jobs_interrupted", "Jobs evicted by maintenance", ["cluster"])
UPDATE_FAILURES = Counter(
    "trainctl_update_failures", "Failed component installs", ["cluster", "component"]
)

_MAINTENANCE = ("cordoned", "draining", "in_maintenance", "verifying")


class FleetCollector(Collector):
    """Reads hosts by state per cluster from the fleet file at scrape time."""

    def __init__(self, fleet_path: Path) -> None:
        self.fleet_path = fleet_path

    def collect(self) -> Iterator[GaugeMetricFamily]:
        import sqlite3

        by_state = GaugeMetricFamily(
            "trainctl_hosts", "Hosts by lifecycle state", labels=["cluster", "state"]
        )
        in_maint = GaugeMetricFamily(
            "trainctl_hosts_in_maintenance",
            "Hosts held by trains or operations",
            labels=["cluster"],
        )
        out = GaugeMetricFamily(
            "trainctl_hosts_out_of_service",
            "Hosts out of service for any reason (budget in use)",
            labels=["cluster"],
        )
        if self.fleet_path.exists():
            conn = sqlite3.connect(f"file:{self.fleet_path}?mode=ro", uri=True, timeout=5)
            try:
                rows = conn.execute(
                    "SELECT cluster, state, COUNT(*) FROM hosts GROUP BY cluster, state"
                ).fetchall()
            finally:
                conn.close()
            maint: dict[str, int] = {}
            down: dict[str, int] = {}
            for cluster, state, n in rows:
                by_state.add_metric([cluster, state], n)
                maint[cluster] = maint.get(cluster, 0) + (n if state in _MAINTENANCE else 0)
                down[cluster] = down.get(cluster, 0) + (n if state != "in_service" else 0)
            for cluster, n in maint.items():
                in_maint.add_metric([cluster], n)
                out.add_metric([cluster], down[cluster])
        yield by_state
        yield in_maint
        yield out


#: Where /metrics listens unless told otherwise: loopback, like the Temporal dev server. A
#: Prometheus in another container or host needs ``--metrics-host 0.0.0.0`` (docker-compose.yml).
DEFAULT_METRICS_HOST = "127.0.0.1"


_collector: FleetCollector | None = None


def serve_metrics(port: int, fleet_path: Path, host: str = DEFAULT_METRICS_HOST) -> Any:
    """Expose /metrics on ``host:port`` with the fleet gauges registered once per process.

    Returns the HTTP server (``shutdown()`` stops it); OSError if the address is taken.
    """
    global _collector
    server = start_http_server(port, addr=host)
    if _collector is None:
        _collector = FleetCollector(fleet_path)
        REGISTRY.register(_collector)
    else:
        _collector.fleet_path = fleet_path
    return server[0] if isinstance(server, tuple) else server
