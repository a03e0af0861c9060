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
import tempfile
from pathlib import Path

LAB_DIR = "slurm-lab"
CLUSTER = "lab"


def lab_dir(home: Path) -> Path:
    return home / LAB_DIR


def short_dir(d: Path) -> Path:
    """Where the lab's Unix sockets live (munge's, each job step's under the slurmd spool): a
    short path of its own, since a socket path may not exceed 108 bytes and TRAINCTL_HOME may
    be deep (pytest's temporary directories are)."""
    digest = hashlib.sha1(str(d.resolve()).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"trainctl-lab-{digest}"


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)


def slurm_conf_text(d: Path, nodes: list[str], ctl_port: int, ports: dict[str, int]) -> str:
    """The lab's ``slurm.conf``: one controller and ``nodes`` slurmds on loopback ports."""
    lines = [
        f"ClusterName={CLUSTER}",
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
    for n in nodes:
        lines.append(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[n]} "
            "CPUs=1 RealMemory=1 State=UNKNOWN"
        )
    lines.append(
        "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE"
    )
    return "\n".join(lines) + "\n"


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
# Install hook of the trainctl lab: record that NODE now carries COMPONENT=VERSION.
printf '{{"node": "%s", "component": "%s", "version": "%s"}}\\n' "$1" "$2" "$3" \\
    >>{lab}/versions.jsonl
"""

_HEALTH = """#!/bin/bash
# Health check of the trainctl lab: the node's slurmd runs.
pid=$(cat {lab}/run/slurmd.$1.pid 2>/dev/null) && kill -0 "$pid" 2>/dev/null \\
    || {{ echo "slurmd of $1 is not running"; exit 1; }}
"""


def write_lab_files(d: Path, nodes: list[str], ctl_port: int, ports: dict[str, int]) -> Path:
    """Write the lab's ``slurm.conf``, scripts and backend config; the backend config's path."""
    write_file(d / "slurm.conf", slurm_conf_text(d, nodes, ctl_port, ports))
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
    "CLUSTER",
    "LAB_DIR",
    "lab_dir",
    "short_dir",
    "slurm_conf_text",
    "write_file",
    "write_lab_files",
]
