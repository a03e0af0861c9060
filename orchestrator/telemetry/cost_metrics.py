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
from orchestrator.contracts.errors import NoFleet
from orchestrator.fleet.store_url import StoreRef
from orchestrator.infra.logging import get_logger
from orchestrator.planning.cost import CostLedger, RestartModel
from orchestrator.telemetry.cost_ledger import ClusterReplay, totals_by_kind

METRIC = "trainctl_maintenance_cost_gpu_hours"
log = get_logger(__name__)


class CostCollector(Collector):
    """Follows the record of the fleet at ``fleet_path`` and exports the ledger's totals."""

    def __init__(self, fleet_path: StoreRef) -> None:
        self.fleet_path = fleet_path
        self.seq = 0
        self.replays: dict[str, ClusterReplay] = {}

    def _open(self) -> FleetBackend:
        from orchestrator.fleet import open_backend

        return open_backend(self.fleet_path)

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
            try:
                self.follow(fleet)
            finally:
                fleet.close()
        except NoFleet:
            pass  # no fleet yet: nothing has cost anything
        except Exception as err:  # a scrape never fails for one collector: what was read stays
            log.warning("maintenance cost not read from the record", error=str(err))
        for (cluster, kind, part), value in sorted(totals_by_kind(self.replays).items()):
            family.add_metric([cluster, kind, part], value)
        yield family
