"""What the lab writes under ``TRAINCTL_HOME/slurm-lab``: where it lives and what each file says.

The lab is a directory of plain files a person can read: the ``slurm.conf`` (one controller and
one slurmd per node on loopback, every path inside the lab), the scripts that stand in for a
site's tooling (``reboot.sh`` the ``RebootProgram``, ``hook.sh`` the install hook, ``health.sh``
the health check) and the backend config that names them. Writing them is text only, no process
started, so it is kept apart from starting and stopping the lab (``slurm``). The lab's Unix
sockets live in a short directory of their own (``short_dir``).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

from orchestrator.lab.slurm_labels import partition_lines

LAB_DIR = "slurm-lab"
#: The default lab's name: its ClusterName, and its nodes are h01, h02, ...
CLUSTER = "lab"
#: A lab's name is its Slurm ClusterName and its nodes' prefix: short, lower case, no dots.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]{0,15}$")
#: The file the install hook reads on every call: one ``COMPONENT VERSION RATE`` per line; a
#: node that got such a build fails the lab's health check (``sick/NODE.COMPONENT``).
BAD_VERSIONS_FILE = "bad-versions.txt"


def lab_dir(home: Path, name: str = CLUSTER) -> Path:
    """``TRAINCTL_HOME/slurm-lab`` for the default lab, ``slurm-lab-NAME`` for another, so
    several labs (several Slurm clusters of one fleet) run side by side."""
    return home / (LAB_DIR if name == CLUSTER else f"{LAB_DIR}-{name}")


def node_names(name: str, count: int) -> list[str]:
    """The default lab's nodes are ``h01``...; another lab's carry its name (``b01``...), so
    two labs in one fleet never share a host name."""
    prefix = "h" if name == CLUSTER else name
    return [f"{prefix}{i:02d}" for i in range(1, count + 1)]


def parse_bad_version(text: str) -> tuple[str, str, float]:
    """``COMPONENT=VERSION[:RATE]`` (rate 1.0 when left out) -> (component, version, rate);
    ValueError naming the field ``bad_version`` otherwise. Versions stay text as written."""
    component, sep, rest = text.partition("=")
    version, _, rate_text = rest.partition(":")
    if not sep or not component.strip() or not version.strip():
        raise ValueError(f"bad_version: {text!r} is not COMPONENT=VERSION[:RATE]")
    if any(c.isspace() for c in component + version):
        raise ValueError(f"bad_version: {text!r} has a space")
    try:
        rate = float(rate_text) if rate_text else 1.0
    except ValueError:
        raise ValueError(f"bad_version: rate {rate_text!r} is not a number") from None
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"bad_version: rate {rate_text!r} must be in (0, 1]")
    return component, version, rate


def write_bad_versions(d: Path, bad: list[tuple[str, str, float]]) -> None:
    """What the hook fails on from its next call (the hook reads the file each time)."""
    write_file(d / BAD_VERSIONS_FILE, "".join(f"{c} {v} {r:g}\n" for c, v, r in bad))


def short_dir(d: Path) -> Path:
    """Where the lab's Unix sockets live (munge's, each job step's under the slurmd spool): a
    short path of its own, since a socket path may not exceed 108 bytes and TRAINCTL_HOME may
    be deep (pytest's temporary directories are)."""
    digest = hashlib.sha1(str(d.resolve()).encode()).hexdigest()[:10]
    # TMPDIR itself may be deep (a test's, a batch job's): then the system's /tmp.
    for root in (tempfile.gettempdir(), "/tmp"):
        here = Path(root) / f"trainctl-lab-{digest}"
        if len(str(here)) <= _SOCKET_DIR_MAX:
            return here
    return here


#: The longest socket directory that leaves room for the longest socket name under it (a
#: slurmd job step's, ``<node>_<job>.<step>``) within the kernel's 108 bytes.
_SOCKET_DIR_MAX = 60


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)


def topology_conf_text(nodes: list[str], racks: int) -> str:
    """``topology.conf`` (``topology/tree``) splitting ``nodes`` into ``racks`` leaf switches
    (``rack1``...) of consecutive nodes under one zone switch (``zone1``): what a real
    cluster's network looks like to Slurm, and where trainctl reads racks and zones from."""
    size = -(-len(nodes) // racks)
    groups = [nodes[i : i + size] for i in range(0, len(nodes), size)]
    lines = [f"SwitchName=rack{i} Nodes={','.join(g)}" for i, g in enumerate(groups, 1)]
    lines.append(
        f"SwitchName=zone1 Switches={','.join(f'rack{i}' for i in range(1, len(groups) + 1))}"
    )
    return "\n".join(lines) + "\n"


def slurm_conf_text(
    d: Path,
    nodes: list[str],
    ctl_port: int,
    ports: dict[str, int],
    name: str = CLUSTER,
    racks: int = 0,
    partitions: dict[str, list[str]] | None = None,
    features: dict[str, list[str]] | None = None,
) -> str:
    """The lab's ``slurm.conf``: one controller and ``nodes`` slurmds on loopback ports (with
    ``racks``, the tree topology of ``topology.conf``; ``partitions`` beside ``main`` and
    static node ``features``, as ``slurm_labels`` reads them)."""
    lines = _cluster_lines(d, ctl_port, name)
    if racks:
        lines.append("TopologyPlugin=topology/tree")
    for n in nodes:
        lines.append(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[n]} "
            "CPUs=1 RealMemory=1 State=UNKNOWN"
            + (f" Features={','.join(feats)}" if (feats := (features or {}).get(n)) else "")
        )
    lines.append(
        "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE"
    )
    lines.extend(partition_lines(partitions or {}))
    return "\n".join(lines) + "\n"


def _cluster_lines(d: Path, ctl_port: int, name: str) -> list[str]:
    """The cluster-wide settings of the lab's ``slurm.conf``: its controller, munge, the
    lab's directories and the plugins and timeouts it runs with."""
    return [
        f"ClusterName={name}",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={ctl_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={short_dir(d) / 'munge.socket'}",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmdSpoolDir={short_dir(d) / 'spool'}/%n",
        f"SlurmctldPidFile={d / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={d / 'run'}/slurmd.%n.pid",
        f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={d / 'log'}/slurmd.%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/linear",
        # 2: a node whose slurmd registers again is back, even after an "unexpected reboot".
        # The lab's reboots are slurmd restarts with -b, which report a fresh boot at every
        # registration: after a slurmctld restart Slurm would otherwise down each node that
        # rebooted since its last state save ("Node unexpectedly rebooted").
        "ReturnToService=2",
        f"RebootProgram={d / 'reboot.sh'}",
        "ResumeTimeout=120",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "MinJobAge=3600",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={d / 'jobcomp.txt'}",
        "SlurmctldParameters=enable_configless",
    ]


_REBOOT = """#!/bin/bash
# RebootProgram of the trainctl lab: restart the slurmd that ran this (never the machine).
LAB={lab}
exec >>"$LAB/log/reboot.log" 2>&1
pid=$PPID node=
while [ "$pid" -gt 1 ] && [ -z "$node" ]; do
    node=$(tr '\\0' '\\n' </proc/$pid/cmdline | grep -A1 -x -- -N | tail -n1)
    pid=$(ps -o ppid= -p "$pid" | tr -d ' ')
done
[ -n "$node" ] || {{ echo "reboot: no node found"; exit 1; }}
echo "$(date -u +%FT%T) reboot $node"
setsid bash -c '
    pidfile="$1/run/slurmd.$2.pid"
    sleep 0.5
    old=$(cat "$pidfile" 2>/dev/null)
    [ -n "$old" ] && kill "$old" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
    exec slurmd -b -f "$1/slurm.conf" -N "$2"
' reboot "$LAB" "$node" </dev/null >/dev/null 2>&1 &
"""

_HOOK = """#!/bin/bash
# Install hook of the trainctl lab: record that NODE now carries COMPONENT=VERSION. A build the
# lab was told is bad (bad-versions.txt: COMPONENT VERSION RATE) installs like any other, then
# leaves the node sick on a fixed share RATE of the nodes (chosen by a hash of node and
# version, so a rerun picks the same ones): the health check fails until another version of
# that component is installed, as a bad kernel or driver shows itself after its reboot.
mkdir -p {lab}/sick
rm -f "{lab}/sick/$1.$2"
while read -r comp ver rate; do
    [ "$comp" = "$2" ] && [ "$ver" = "$3" ] || continue
    pick=$((16#$(printf '%s %s %s' "$1" "$2" "$3" | sha256sum | cut -c1-8)))
    if awk -v p="$pick" -v r="$rate" 'BEGIN {{ exit !(p / 4294967296 < r) }}'; then
        echo "$2=$3" >"{lab}/sick/$1.$2"
    fi
done < <(cat {lab}/bad-versions.txt 2>/dev/null)
printf '{{"node": "%s", "component": "%s", "version": "%s"}}\\n' "$1" "$2" "$3" \\
    >>{lab}/versions.jsonl
"""

_HEALTH = """#!/bin/bash
# Health check of the trainctl lab: the node's slurmd runs, and it carries no bad build.
pid=$(cat {lab}/run/slurmd.$1.pid 2>/dev/null) && kill -0 "$pid" 2>/dev/null \\
    || {{ echo "slurmd of $1 is not running"; exit 1; }}
for f in {lab}/sick/$1.*; do
    [ -e "$f" ] && {{ echo "$1 is unhealthy after installing $(cat "$f")"; exit 1; }}
done
exit 0
"""


def write_lab_files(
    d: Path,
    nodes: list[str],
    ctl_port: int,
    ports: dict[str, int],
    name: str = CLUSTER,
    bad: list[tuple[str, str, float]] | None = None,
    racks: int = 0,
    partitions: dict[str, list[str]] | None = None,
    features: dict[str, list[str]] | None = None,
) -> Path:
    """Write the lab's ``slurm.conf`` (and ``topology.conf`` with ``racks``), scripts, bad
    versions and backend config; the backend config's path."""
    conf = slurm_conf_text(d, nodes, ctl_port, ports, name, racks, partitions, features)
    write_file(d / "slurm.conf", conf)
    topology = d / "topology.conf"
    if racks:
        write_file(topology, topology_conf_text(nodes, racks))
    else:
        topology.unlink(missing_ok=True)
    write_bad_versions(d, bad or [])
    write_file(d / "reboot.sh", _REBOOT.format(lab=d), 0o755)
    write_file(d / "hook.sh", _HOOK.format(lab=d), 0o755)
    write_file(d / "health.sh", _HEALTH.format(lab=d), 0o755)
    config = d / "backend.yaml"
    write_file(
        config,
        f'hooks:\n  "*": "{d / "hook.sh"} {{node}} {{component}} {{version}}"\n'
        f'health_command: "{d / "health.sh"} {{node}}"\n'
        "reboot_timeout: 2m\n"
        "feature_components: [os, gpu_driver, cuda]\n",
    )
    return config


__all__ = [
    "BAD_VERSIONS_FILE",
    "CLUSTER",
    "LAB_DIR",
    "NAME_PATTERN",
    "lab_dir",
    "node_names",
    "parse_bad_version",
    "write_bad_versions",
    "short_dir",
    "slurm_conf_text",
    "topology_conf_text",
    "write_file",
    "write_lab_files",
]
