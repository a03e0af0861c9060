"""The fleet's physical and network topology as a networkx graph, with fast blast-radius queries.

Containment edges run fleet → region → datacenter → cluster → zone → rack → host; switch edges run
aggregation switch → zone, spine switch → rack, rack switch → host. The hosts below any node are its
blast radius. Answers for the levels people ask about most (cluster, zone, rack, switch) are
precomputed at build time so that queries stay in microseconds at 75,000 hosts.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

import networkx as nx

from orchestrator.fleet.presets import Preset


def host_name(cluster: str, zone: int, rack: int, host: int) -> str:
    return f"{cluster}-z{zone:02d}-r{rack:03d}-h{host:02d}"


def rack_switch(rack: str) -> str:
    """The name of a rack's switch (every host of the rack sits below it)."""
    return f"rsw-{rack}"


class Topology:
    """Graph of one fleet built from a preset. Node ids are names; ``kind`` says what each is."""

    def __init__(self, preset: Preset) -> None:
        self.preset = preset
        g = nx.DiGraph()
        g.add_node("fleet", kind="fleet")
        self._hosts_of: dict[str, list[str]] = {}
        self._domains_of_host: dict[str, tuple[str, str, str]] = {}
        self._switch_scope: dict[str, str] = {}
        self.hosts: list[str] = []
        self.switches: list[tuple[str, str, str]] = []  # (name, tier, cluster)
        for ci, cluster in enumerate(preset.cluster_names()):
            dc_i = ci // preset.clusters_per_datacenter
            region = f"region{dc_i // preset.datacenters_per_region}"
            dc = f"dc{dc_i}"
            g.add_node(region, kind="region")
            g.add_node(dc, kind="datacenter")
            g.add_edge("fleet", region)
            g.add_edge(region, dc)
            g.add_node(cluster, kind="cluster")
            g.add_edge(dc, cluster)
            cluster_hosts: list[str] = []
            for a in range(preset.aggregation_per_cluster):
                asw = f"asw-{cluster}-{a}"
                g.add_node(asw, kind="switch", tier="aggregation")
                self._switch_scope[asw] = cluster
                self.switches.append((asw, "aggregation", cluster))
            for z in range(preset.zones_per_cluster):
                zone = f"{cluster}-z{z:02d}"
                g.add_node(zone, kind="zone")
                g.add_edge(cluster, zone)
                for a in range(preset.aggregation_per_cluster):
                    g.add_edge(f"asw-{cluster}-{a}", zone)
                zone_hosts: list[str] = []
                spines = [f"ssw-{zone}-{s}" for s in range(preset.spines_per_zone)]
                for ssw in spines:
                    g.add_node(ssw, kind="switch", tier="spine")
                    self._switch_scope[ssw] = zone
                    self.switches.append((ssw, "spine", cluster))
                for r in range(preset.racks_per_zone):
                    rack = f"{zone}-r{r:03d}"
                    rsw = rack_switch(rack)
                    g.add_node(rack, kind="rack")
                    g.add_edge(zone, rack)
                    for ssw in spines:
                        g.add_edge(ssw, rack)
                    g.add_node(rsw, kind="switch", tier="rack")
                    self._switch_scope[rsw] = rack
                    self.switches.append((rsw, "rack", cluster))
                    rack_hosts = [host_name(cluster, z, r, h) for h in range(preset.hosts_per_rack)]
                    for h in rack_hosts:
                        g.add_node(h, kind="host")
                        g.add_edge(rack, h)
                        g.add_edge(rsw, h)
                        self._domains_of_host[h] = (cluster, zone, rack)
                    self._hosts_of[rack] = rack_hosts
                    zone_hosts.extend(rack_hosts)
                self._hosts_of[zone] = zone_hosts
                cluster_hosts.extend(zone_hosts)
            self._hosts_of[cluster] = cluster_hosts
            self.hosts.extend(cluster_hosts)
        self.graph = g

    @cached_property
    def _host_index(self) -> dict[str, int]:
        return {h: i for i, h in enumerate(self.hosts)}

    def kind(self, node: str) -> str:
        return str(self.graph.nodes[node]["kind"])

    def hosts_below(self, node: str) -> list[str]:
        """Blast radius: every host below ``node`` (a switch, rack, zone, cluster, dc or region)."""
        if node in self._hosts_of:
            return self._hosts_of[node]
        if node in self._switch_scope:
            return self._hosts_of[self._switch_scope[node]]
        if node not in self.graph:
            raise KeyError(f"node: unknown topology element {node!r}")
        if self.kind(node) == "host":
            return [node]
        found = [
            n for n in nx.descendants(self.graph, node) if self.graph.nodes[n]["kind"] == "host"
        ]
        return sorted(found, key=self._host_index.__getitem__)

    def failure_domains(self, host: str) -> dict[str, str]:
        """The cluster, zone and rack a host belongs to (the domains budgets are counted in)."""
        cluster, zone, rack = self._domains_of_host[host]
        return {"cluster": cluster, "zone": zone, "rack": rack}

    def close_hosts(self, host: str, candidates: Iterable[str] | None = None) -> list[str]:
        """Hosts ordered by network distance from ``host``: same rack, same zone, same cluster."""
        cluster, zone, rack = self._domains_of_host[host]
        pool = self._hosts_of[cluster] if candidates is None else list(candidates)

        def distance(h: str) -> tuple[int, int]:
            _, z, r = self._domains_of_host[h]
            return (0 if r == rack else 1 if z == zone else 2, self._host_index[h])

        return sorted((h for h in pool if h != host), key=distance)

    def clusters(self) -> list[str]:
        return self.preset.cluster_names()

    def racks(self, cluster: str) -> list[str]:
        return [n for n in self.graph.successors(cluster) for n in self.graph.successors(n)]
