"""Topology at meta-600k scale: blast radius of every switch tier, failure domains, closeness.

The oracle is independent of the precomputed answers: host names say which rack, zone and
cluster a host is in, and ``networkx.descendants`` walks the graph's real edges.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import networkx as nx
import pytest

from orchestrator.contracts.models import GPUS_PER_HOST
from orchestrator.fleet.presets import PRESETS
from orchestrator.fleet.topology import Topology


@pytest.fixture(scope="module")
def topo() -> Topology:
    return Topology(PRESETS["meta-600k"])


@pytest.fixture(scope="module")
def by_name(topo: Topology) -> dict[str, dict[str, list[str]]]:
    """Hosts grouped by the rack, zone and cluster their names spell (``c00-z01-r002-h03``)."""
    groups: dict[str, dict[str, list[str]]] = {
        "rack": defaultdict(list),
        "zone": defaultdict(list),
        "cluster": defaultdict(list),
    }
    for h in topo.hosts:
        cluster, zone, rack, _ = h.split("-")
        groups["cluster"][cluster].append(h)
        groups["zone"][f"{cluster}-{zone}"].append(h)
        groups["rack"][f"{cluster}-{zone}-{rack}"].append(h)
    return groups


def _graph_hosts(topo: Topology, node: str) -> set[str]:
    g = topo.graph
    return {n for n in nx.descendants(g, node) if g.nodes[n]["kind"] == "host"}


def test_meta_600k_shape(topo: Topology) -> None:
    """meta-600k has 25 clusters, 76,800 distinct hosts (614,400 GPUs) and every switch tier."""
    assert topo.clusters() == [f"c{i:02d}" for i in range(25)]
    assert len(topo.hosts) == len(set(topo.hosts)) == 76_800
    assert len(topo.hosts) * GPUS_PER_HOST >= 600_000
    tiers = Counter(tier for _, tier, _ in topo.switches)
    assert tiers == {"rack": 25 * 8 * 24, "spine": 25 * 8 * 4, "aggregation": 25 * 4}
    assert all(topo.kind(h) == "host" for h in topo.hosts[::997])
    assert len(topo.racks("c07")) == 8 * 24


def test_rack_switch_blast_radius_is_its_rack(topo: Topology, by_name: dict) -> None:
    """Every rack switch takes down exactly the hosts of its rack, as the graph's edges say."""
    rack_switches = [s for s, tier, _ in topo.switches if tier == "rack"]
    for rsw in rack_switches:
        rack = rsw.removeprefix("rsw-")
        assert topo.hosts_below(rsw) == by_name["rack"][rack] == topo.hosts_below(rack)
        assert len(by_name["rack"][rack]) == 16
    for rsw in random.Random(1).sample(rack_switches, 40):
        assert set(topo.hosts_below(rsw)) == _graph_hosts(topo, rsw)


def test_spine_switch_blast_radius_is_its_zone(topo: Topology, by_name: dict) -> None:
    """Every spine switch takes down exactly the hosts of its zone."""
    spines = [s for s, tier, _ in topo.switches if tier == "spine"]
    for ssw in spines:
        zone = ssw.removeprefix("ssw-").rsplit("-", 1)[0]
        assert topo.hosts_below(ssw) == by_name["zone"][zone] == topo.hosts_below(zone)
        assert len(by_name["zone"][zone]) == 24 * 16
    for ssw in random.Random(2).sample(spines, 10):
        assert set(topo.hosts_below(ssw)) == _graph_hosts(topo, ssw)


def test_aggregation_switch_blast_radius_is_its_cluster(topo: Topology, by_name: dict) -> None:
    """Every aggregation switch takes down exactly the hosts of its cluster."""
    aggs = [(s, c) for s, tier, c in topo.switches if tier == "aggregation"]
    assert len({c for _, c in aggs}) == 25
    for asw, cluster in aggs:
        assert asw.startswith(f"asw-{cluster}-")
        assert topo.hosts_below(asw) == by_name["cluster"][cluster] == topo.hosts_below(cluster)
        assert len(by_name["cluster"][cluster]) == 3072
    for asw, _ in random.Random(3).sample(aggs, 3):
        assert set(topo.hosts_below(asw)) == _graph_hosts(topo, asw)


def test_blast_radius_above_cluster_and_of_a_host(topo: Topology, by_name: dict) -> None:
    """A datacenter, a region and the fleet cover their clusters' hosts; a host covers itself."""
    clusters = by_name["cluster"]
    dc0 = [h for c in ("c00", "c01", "c02", "c03", "c04") for h in clusters[c]]
    assert topo.hosts_below("dc0") == dc0
    region2 = [h for i in range(20, 25) for h in clusters[f"c{i:02d}"]]
    assert topo.hosts_below("region2") == region2
    assert topo.hosts_below("fleet") == topo.hosts
    assert topo.hosts_below("c03-z02-r005-h07") == ["c03-z02-r005-h07"]
    with pytest.raises(KeyError, match="node"):
        topo.hosts_below("rsw-c99-z00-r000")


def test_failure_domains_match_the_graph(topo: Topology) -> None:
    """A host's failure domains are the rack, zone and cluster that contain it in the graph."""
    g = topo.graph

    def parent(node: str, kind: str) -> str:
        (found,) = [p for p in g.predecessors(node) if g.nodes[p]["kind"] == kind]
        return found

    for host in random.Random(4).sample(topo.hosts, 200):
        dom = topo.failure_domains(host)
        rack = parent(host, "rack")
        zone = parent(rack, "zone")
        cluster = parent(zone, "cluster")
        assert dom == {"cluster": cluster, "zone": zone, "rack": rack}
        assert host in topo.hosts_below(dom["rack"])


def test_close_hosts_orders_rack_then_zone_then_cluster(topo: Topology, by_name: dict) -> None:
    """close_hosts lists the rest of the cluster: own rack first, then own zone, then the rest."""
    host = "c11-z03-r017-h05"
    order = topo.close_hosts(host)
    assert host not in order
    assert sorted(order) == sorted(h for h in by_name["cluster"]["c11"] if h != host)
    rack, zone = by_name["rack"]["c11-z03-r017"], by_name["zone"]["c11-z03"]
    assert set(order[:15]) == set(rack) - {host}
    assert set(order[15 : len(zone) - 1]) == set(zone) - set(rack)
    subset = ["c11-z00-r000-h00", "c11-z03-r000-h00", "c11-z03-r017-h00"]
    assert topo.close_hosts(host, subset) == subset[::-1]
