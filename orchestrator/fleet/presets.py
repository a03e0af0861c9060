"""Fleet presets: the shape of a simulated fleet, sized on Meta's published clusters.

A cluster is zones of racks of 8-GPU hosts. ``meta-24k`` is one 24,576-GPU cluster (3,072 Grand
Teton hosts); ``meta-600k`` is 25 such clusters (614,400 GPUs), the scale Meta was heading to.
"""

from __future__ import annotations

from pydantic import BaseModel

from orchestrator.contracts.models import GPUS_PER_HOST

#: Versions every host starts on; targets in specs are compared with these.
INITIAL_VERSIONS: dict[str, str] = {
    "os": "6.8.0-40",
    "bios": "3.1",
    "bmc": "1.8.2",
    "gpu_firmware": "96.00.9F.00.01",
    "nic_firmware": "28.39.1002",
    "gpu_driver": "550.90.07",
    "cuda": "12.4",
}
INITIAL_SWITCH_FIRMWARE = "EOS-4.31.2F"


class Preset(BaseModel):
    """How many of each level a fleet has, and how busy its job scheduler keeps it."""

    name: str
    description: str
    clusters: int
    zones_per_cluster: int
    racks_per_zone: int
    hosts_per_rack: int
    clusters_per_datacenter: int = 5
    datacenters_per_region: int = 2
    spines_per_zone: int = 4
    aggregation_per_cluster: int = 4
    target_utilisation: float = 0.9
    max_job_hosts: int = 2048

    @property
    def hosts_per_cluster(self) -> int:
        return self.zones_per_cluster * self.racks_per_zone * self.hosts_per_rack

    @property
    def hosts_total(self) -> int:
        return self.clusters * self.hosts_per_cluster

    @property
    def gpus_total(self) -> int:
        return self.hosts_total * GPUS_PER_HOST

    def cluster_names(self) -> list[str]:
        return [f"c{i:02d}" for i in range(self.clusters)]


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="small",
            description="one cluster c00 of 128 hosts (1,024 GPUs) for demos and tests",
            clusters=1,
            zones_per_cluster=2,
            racks_per_zone=8,
            hosts_per_rack=8,
            max_job_hosts=64,
        ),
        Preset(
            name="multi",
            description="4 clusters c00..c03 of 64 hosts (2,048 GPUs) for campaign demos and tests",
            clusters=4,
            zones_per_cluster=2,
            racks_per_zone=4,
            hosts_per_rack=8,
            max_job_hosts=32,
        ),
        Preset(
            name="meta-24k",
            description="one 24,576-GPU cluster c00: 3,072 hosts, 8 zones of 24 racks of 16",
            clusters=1,
            zones_per_cluster=8,
            racks_per_zone=24,
            hosts_per_rack=16,
        ),
        Preset(
            name="meta-600k",
            description="25 clusters c00..c24 of 3,072 hosts: 76,800 hosts, 614,400 GPUs",
            clusters=25,
            zones_per_cluster=8,
            racks_per_zone=24,
            hosts_per_rack=16,
        ),
    )
}


def get_preset(name: str) -> Preset:
    """Return the preset called ``name`` or raise ValueError naming ``preset``."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"preset: unknown preset {name!r} (known: {', '.join(PRESETS)})") from None
