"""Failure domains of Slurm nodes: ``topology.conf``'s switches when there is one, else names.

With ``TopologyPlugin=topology/tree`` Slurm already knows the network: a leaf switch
(``SwitchName=s1 Nodes=h[01-04]``) is a rack, the switch above it (``Switches=s[1-2]``) a zone.
Without that file the backend config's naming rule (``config.Naming``) derives them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from orchestrator.fleet.slurm.commands import expand_hostlist
from orchestrator.fleet.slurm.config import Naming

_LINE = re.compile(r"(\w+)=(\S+)")


def parse_topology(text: str) -> dict[str, tuple[str, str]]:
    """node -> (leaf switch, its parent switch or ``default``) from topology.conf text."""
    leaves: dict[str, str] = {}
    parent: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {k.lower(): v for k, v in _LINE.findall(line)}
        switch = fields.get("switchname")
        if not switch:
            continue
        for node in expand_hostlist(fields.get("nodes", "")):
            leaves[node] = switch
        for child in expand_hostlist(fields.get("switches", "")):
            parent[child] = switch
    return {n: (s, parent.get(s, "default")) for n, s in leaves.items()}


def failure_domains_of(
    slurm_conf: Path, nodes: Sequence[str], naming: Naming
) -> dict[str, tuple[str, str]]:
    """(rack, zone) of each node: topology.conf beside ``slurm_conf`` first, then ``naming``."""
    topo: dict[str, tuple[str, str]] = {}
    path = slurm_conf.parent / "topology.conf"
    if path.is_file():
        topo = parse_topology(path.read_text())
    return {n: topo.get(n) or naming.domain(n) for n in nodes}
