"""A real local Slurm cluster for trying trainctl and for tests: ``trainctl lab slurm up|down``.

One ``slurmctld`` and one ``slurmd -N hNN`` per node, all on this machine, on free loopback
ports (Slurm's multiple-slurmd-per-host setup: every node has ``NodeHostname=localhost`` and
its own ``Port``). Everything lives under ``TRAINCTL_HOME/slurm-lab``: the ``slurm.conf``, a
private ``munged`` with its own key and socket (the machine's munge is never touched), the
controller's state, each slurmd's spool, logs and pid files. Run as root, so ``SlurmUser=root``.

What a real cluster does through site tooling the lab does with small scripts it writes:

- ``hook.sh NODE COMPONENT VERSION`` records the install in ``versions.jsonl`` (the lab's
  state of what each node carries);
- ``health.sh NODE`` passes while that node's slurmd runs;
- ``reboot.sh`` is the ``RebootProgram``: it finds which node's slurmd ran it and restarts that
  slurmd with ``-b`` (report a reboot), never the machine.

``down`` stops exactly the processes ``up`` started: those whose pid files are in the lab and
whose command line names the lab's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

LAB_DIR = "slurm-lab"
CLUSTER = "lab"
#: Seconds ``up`` waits for the controller and every node to answer.
START_TIMEOUT_SECONDS = 90.0
MAX_NODES = 64


class LabError(RuntimeError):
    """The lab could not be started or stopped (message names what failed)."""


@dataclass
class LabInfo:
    slurm_conf: str
    cluster: str
    nodes: list[str]
    backend_config: str
    controller_port: int
    node_ports: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def lab_dir(home: Path) -> Path:
    return home / LAB_DIR


def short_dir(d: Path) -> Path:
    """Where the lab's Unix sockets live (munge's, each job step's under the slurmd spool): a
    short path of its own, since a socket path may not exceed 108 bytes and TRAINCTL_HOME may
    be deep (pytest's temporary directories are)."""
    digest = hashlib.sha1(str(d.resolve()).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"trainctl-lab-{digest}"


def _free_ports(count: int) -> list[int]:
    """``count`` loopback ports nobody listens on now (the kernel's picks, kept distinct)."""
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)


def _node_names(n: int) -> list[str]:
    return [f"h{i:02d}" for i in range(1, n + 1)]


def _slurm_conf(d: Path, nodes: list[str], ctl_port: int, ports: dict[str, int]) -> str:
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


def _env(d: Path) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}


def _run(args: list[str], d: Path, what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, env=_env(d), check=False)
    if done.returncode != 0:
        why = " ".join((done.stderr or done.stdout).split())[:300]
        raise LabError(f"lab: {what} failed: {why}")


def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ours(pid: int, d: Path) -> bool:
    """The process's command line names a file of this lab (so down never kills another's)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(d) in cmd


def _start_munge(d: Path) -> None:
    m = d / "munge"
    if _pid(m / "munged.pid"):
        return
    m.mkdir(mode=0o700, exist_ok=True)
    key = m / "munge.key"
    if not key.exists():
        key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    munged = shutil.which("munged") or "/usr/sbin/munged"
    _run(
        [
            munged,
            "--force",
            f"--socket={short_dir(d) / 'munge.socket'}",
            f"--key-file={key}",
            f"--pid-file={m / 'munged.pid'}",
            f"--log-file={m / 'munged.log'}",
            f"--seed-file={m / 'munged.seed'}",
        ],
        d,
        "starting munged",
    )


def _which(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if path is None:
        raise LabError(f"lab: {name} is not installed (scripts/test installs slurmctld, slurmd)")
    return path


def start_controller(d: Path) -> None:
    _run([_which("slurmctld"), "-f", str(d / "slurm.conf")], d, "starting slurmctld")


def stop_controller(d: Path, timeout: float = 30.0) -> None:
    _stop(d / "run" / "slurmctld.pid", d, timeout)


def restart_controller(home: Path) -> None:
    """Stop the lab's slurmctld and start it again (its saved state survives; features set by
    ``scontrol update`` do not, as on a real cluster)."""
    d = lab_dir(home)
    stop_controller(d)
    start_controller(d)


def start_node(d: Path, node: str) -> None:
    _run([_which("slurmd"), "-f", str(d / "slurm.conf"), "-N", node], d, f"starting slurmd {node}")


def _stop(pidfile: Path, d: Path, timeout: float) -> None:
    pid = _pid(pidfile)
    if pid is None or not _ours(pid, d):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def _sinfo(d: Path) -> list[tuple[str, str]]:
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env=_env(d)
    )
    if done.returncode != 0:
        return []
    return [tuple(line.split()[:2]) for line in done.stdout.splitlines() if line.strip()]  # type: ignore[misc]


def wait_ready(d: Path, nodes: list[str], timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Until the controller answers and every node has registered."""
    deadline = time.monotonic() + timeout
    while True:
        states = dict(_sinfo(d))
        waiting = [n for n in nodes if states.get(n, "unknown").rstrip("*~#") in ("unknown", "")]
        if states and not waiting:
            return
        if time.monotonic() > deadline:
            raise LabError(f"lab: nodes did not register within {timeout:g}s: {waiting[:5]}")
        time.sleep(0.5)


def lab_up(home: Path, nodes: int = 16) -> LabInfo:
    """Start (or find running) the lab under ``home``; stops what it started if it fails."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"nodes: must be from 1 to {MAX_NODES}")
    d = lab_dir(home)
    info_path = d / "lab.json"
    if info_path.exists() and _pid(d / "run" / "slurmctld.pid"):
        return LabInfo(**json.loads(info_path.read_text()))
    lab_down(home)
    # a new lab: no jobs, drains or features of an old one
    shutil.rmtree(d / "state", ignore_errors=True)
    shutil.rmtree(short_dir(d), ignore_errors=True)
    for name in ("jobcomp.txt", "versions.jsonl"):
        (d / name).unlink(missing_ok=True)
    (short_dir(d) / "spool").mkdir(parents=True, exist_ok=True)
    for sub in ("state", "run", "log"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    names = _node_names(nodes)
    ports = _free_ports(nodes + 1)
    node_ports = dict(zip(names, ports[1:], strict=True))
    _write(d / "slurm.conf", _slurm_conf(d, names, ports[0], node_ports))
    _write(d / "reboot.sh", _REBOOT.format(lab=d), 0o755)
    _write(d / "hook.sh", _HOOK.format(lab=d), 0o755)
    _write(d / "health.sh", _HEALTH.format(lab=d), 0o755)
    config = d / "backend.yaml"
    _write(
        config,
        f'hooks:\n  "*": "{d / "hook.sh"} {{node}} {{component}} {{version}}"\n'
        f'health_command: "{d / "health.sh"} {{node}}"\n'
        "reboot_timeout: 2m\n"
        "feature_components: [os, gpu_driver, cuda]\n",
    )
    info = LabInfo(str(d / "slurm.conf"), CLUSTER, names, str(config), ports[0], node_ports)
    try:
        _start_munge(d)
        start_controller(d)
        for n in names:
            (short_dir(d) / "spool" / n).mkdir(exist_ok=True)
            start_node(d, n)
        wait_ready(d, names)
    except BaseException:
        lab_down(home)
        raise
    _write(info_path, json.dumps(info.to_json(), indent=1))
    return info


def lab_down(home: Path) -> list[str]:
    """Stop every process the lab started (slurmds, slurmctld, munged); what was stopped."""
    d = lab_dir(home)
    stopped = []
    run = d / "run"
    if run.is_dir() and _pid(run / "slurmctld.pid"):
        _cancel_jobs(d)
    if run.is_dir():
        for pidfile in sorted(run.glob("slurmd.*.pid")):
            if _pid(pidfile):
                _stop(pidfile, d, 15.0)
                stopped.append(pidfile.name.removesuffix(".pid"))
        if _pid(run / "slurmctld.pid"):
            stop_controller(d)
            stopped.append("slurmctld")
    if _pid(d / "munge" / "munged.pid"):
        _stop(d / "munge" / "munged.pid", d, 10.0)
        stopped.append("munged")
    for pid in _lab_processes(d):  # job steps a stopped slurmd left behind
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            stopped.append(f"pid {pid}")
    (d / "lab.json").unlink(missing_ok=True)
    shutil.rmtree(short_dir(d), ignore_errors=True)
    return stopped


def _cancel_jobs(d: Path, timeout: float = 15.0) -> None:
    """Cancel every job of the lab and wait (bounded) until none is left running."""
    subprocess.run(["scancel", "--full", "--user", "root"], env=_env(d), capture_output=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["squeue", "-h", "-t", "R,CG", "-o", "%i"], env=_env(d), capture_output=True, text=True
        )
        if done.returncode != 0 or not done.stdout.strip():
            return
        time.sleep(0.3)


def _ancestors() -> set[int]:
    """This process and its ancestors (a shell that exported the lab's SLURM_CONF is spared)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _lab_processes(d: Path) -> list[int]:
    """Processes started under the lab: their environment names the lab's slurm.conf (the
    daemons get it from ``up``, job steps and jobs inherit it)."""
    mark = f"SLURM_CONF={d / 'slurm.conf'}".encode()
    spare = _ancestors()
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in spare:
            continue
        try:
            env = (proc / "environ").read_bytes()
        except OSError:
            continue
        if mark in env.split(b"\0"):
            out.append(int(proc.name))
    return out


def lab_versions(home: Path) -> dict[str, dict[str, str]]:
    """What the lab's hook recorded: node -> component -> version (latest install wins)."""
    out: dict[str, dict[str, str]] = {}
    path = lab_dir(home) / "versions.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out.setdefault(rec["node"], {})[rec["component"]] = rec["version"]
    return out
