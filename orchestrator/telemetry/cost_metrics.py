"""``trainctl_maintenance_cost_gpu_hours_total{cluster,owner_kind,part}``, from the durable record.

A collector, not counters incremented in memory: at each scrape it reads the record's new entries
(after the last sequence number it read) into the live ledger's replay (``cost_ledger``), so
every worker exporting it reports the same truth, and a restarted one starts again from the
record. Holds still open count up to the last entry, so the counter only grows.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from orchestrator.contracts.backend import FleetBackend
from orchestrator.fleet.store_url import StoreRef
from orchestrator.planning.cost import CostLedger, RestartModel
from orchestrator.telemetry.cost_ledger import ClusterReplay, totals_by_kind

METRIC = "trainctl_maintenance_cost_gpu_hours"


class CostCollector(Collector):
    """Follows the record of the fleet at ``fleet_path`` and exports the ledger's totals."""

    def __init__(self, fleet_path: StoreRef) -> None:
        self.fleet_path = fleet_path
        self.seq = 0
        self.replays: dict[str, ClusterReplay] = {}

    def _open(self) -> FleetBackend:
        from orchestrator.fleet import SqliteFleet

        return SqliteFleet(self.fleet_path, read_only=True)

    def follow(self, fleet: FleetBackend) -> None:
        """Read the record's entries after the last one read."""
        for seq, e, cluster in fleet.records(since=self.seq):
            rep = self.replays.get(cluster)
            if rep is None:
                rep = self.replays[cluster] = ClusterReplay(ledger=CostLedger(RestartModel()))
            rep.apply(e)
            self.seq = seq

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            METRIC,
            "GPU-hours maintenance cost the jobs, by part (held_idle, drain_wait, lost_work, "
            "restart, checkpoint_writes), read from the fleet's record",
            labels=["cluster", "owner_kind", "part"],
        )
        try:
            fleet = self._open()
        except FileNotFoundError:
            yield family
            return
        try:
            self.follow(fleet)
        finally:
            fleet.close()
        for (cluster, kind, part), value in sorted(totals_by_kind(self.replays).items()):
            family.add_metric([cluster, kind, part], value)
        yield family
