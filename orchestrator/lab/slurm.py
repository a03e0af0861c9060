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
whose command line names the lab's files. This module starts and stops the lab; the files it
writes are ``slurm_files``, and finding and stopping its processes is ``slurm_processes``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from orchestrator.lab.slurm_files import (
    CLUSTER,
    NAME_PATTERN,
    lab_dir,
    node_names,
    short_dir,
    write_bad_versions,
    write_file,
    write_lab_files,
)
from orchestrator.lab.slurm_labels import parse_features, parse_partitions
from orchestrator.lab.slurm_processes import lab_processes, running_pid, stop

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
    #: The lab's name (its ClusterName); labs of other names run beside it.
    name: str = CLUSTER
    #: Bad builds, as ``--bad-version`` said: (component, version, rate); a node that gets one
    #: fails the lab's health check.
    bad_versions: list[tuple[str, str, float]] = field(default_factory=list)
    #: Leaf switches of its ``topology.conf`` (0: none, racks then come from node names).
    racks: int = 0
    #: Partitions beside ``main``: name -> nodes (``--partition``).
    partitions: dict[str, list[str]] = field(default_factory=dict)
    #: Static node features: node -> features (``--feature``).
    features: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


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


def _env(d: Path) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}


def _run(args: list[str], d: Path, what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, env=_env(d), check=False)
    if done.returncode != 0:
        why = " ".join((done.stderr or done.stdout).split())[:300]
        raise LabError(f"lab: {what} failed: {why}")


def _start_munge(d: Path) -> None:
    m = d / "munge"
    if running_pid(m / "munged.pid"):
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
    stop(d / "run" / "slurmctld.pid", d, timeout)


def restart_controller(home: Path, name: str = CLUSTER) -> None:
    """Stop the lab's slurmctld and start it again (its saved state survives; features set by
    ``scontrol update`` do not, as on a real cluster)."""
    d = lab_dir(home, name)
    stop_controller(d)
    start_controller(d)


def start_node(d: Path, node: str) -> None:
    _run([_which("slurmd"), "-f", str(d / "slurm.conf"), "-N", node], d, f"starting slurmd {node}")


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


def _read_info(path: Path) -> LabInfo:
    raw = json.loads(path.read_text())
    raw["bad_versions"] = [tuple(b) for b in raw.get("bad_versions", [])]
    return LabInfo(**raw)


def lab_running(home: Path, name: str = CLUSTER) -> LabInfo | None:
    """The lab ``name`` running under ``home`` (its controller alive), or None."""
    d = lab_dir(home, name)
    info_path = d / "lab.json"
    if info_path.exists() and running_pid(d / "run" / "slurmctld.pid"):
        return _read_info(info_path)
    return None


def set_bad_versions(home: Path, name: str, bad: list[tuple[str, str, float]]) -> LabInfo:
    """Tell a running lab which builds are bad, from its next install on."""
    info = lab_running(home, name)
    if info is None:
        raise LabError(f"lab: no lab named {name} runs")
    d = lab_dir(home, name)
    write_bad_versions(d, bad)
    info.bad_versions = list(bad)
    write_file(d / "lab.json", json.dumps(info.to_json(), indent=1))
    return info


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise ValueError(
            f"name: {name!r} must be lower-case letters and digits, starting with a letter, "
            "at most 16 (it is the Slurm ClusterName and the nodes' prefix)"
        )
    return name


def lab_up(
    home: Path,
    nodes: int = 16,
    name: str = CLUSTER,
    bad_versions: list[tuple[str, str, float]] | None = None,
    racks: int = 0,
    partitions: list[str] | None = None,
    features: list[str] | None = None,
) -> LabInfo:
    """Start (or find running) the lab ``name`` under ``home``; stops what it started if it
    fails. ``bad_versions``: builds that leave a node unhealthy (component, version, rate);
    ``racks``: split the nodes into that many racks of one zone in a ``topology.conf``;
    ``partitions`` (``NAME=HOSTLIST``) and ``features`` (``HOSTLIST=F1,F2``): extra partitions
    and static node features (``slurm_labels``), ValueError naming the field."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"nodes: must be from 1 to {MAX_NODES}")
    if not 0 <= racks <= nodes:
        raise ValueError(f"racks: must be from 0 to the {nodes} nodes")
    check_name(name)
    names = node_names(name, nodes)
    parts = parse_partitions(list(partitions or []), names)
    feats = parse_features(list(features or []), names)
    d = lab_dir(home, name)
    info_path = d / "lab.json"
    if info_path.exists() and running_pid(d / "run" / "slurmctld.pid"):
        return _read_info(info_path)
    lab_down(home, name)
    _clear_lab_dir(d)
    ports = _free_ports(nodes + 1)
    node_ports = dict(zip(names, ports[1:], strict=True))
    bad = list(bad_versions or [])
    config = write_lab_files(d, names, ports[0], node_ports, name, bad, racks, parts, feats)
    info = LabInfo(
        str(d / "slurm.conf"),
        name,
        names,
        str(config),
        ports[0],
        node_ports,
        name,
        bad,
        racks,
        parts,
        feats,
    )
    _start_daemons(home, name, d, names)
    write_file(info_path, json.dumps(info.to_json(), indent=1))
    return info


def _clear_lab_dir(d: Path) -> None:
    """The lab's directory for a new lab: no jobs, drains or features of an old one."""
    shutil.rmtree(d / "state", ignore_errors=True)
    shutil.rmtree(d / "sick", ignore_errors=True)
    shutil.rmtree(short_dir(d), ignore_errors=True)
    for leftover in ("jobcomp.txt", "versions.jsonl"):
        (d / leftover).unlink(missing_ok=True)
    (short_dir(d) / "spool").mkdir(parents=True, exist_ok=True)
    for sub in ("state", "run", "log"):
        (d / sub).mkdir(parents=True, exist_ok=True)


def _start_daemons(home: Path, name: str, d: Path, names: list[str]) -> None:
    """Start munged, the controller and every node's slurmd, and wait until all answer; on
    any failure stop what was started and raise."""
    try:
        _start_munge(d)
        start_controller(d)
        for n in names:
            (short_dir(d) / "spool" / n).mkdir(exist_ok=True)
            start_node(d, n)
        wait_ready(d, names)
    except BaseException:
        lab_down(home, name)
        raise


def lab_down(home: Path, name: str = CLUSTER) -> list[str]:
    """Stop every process the lab ``name`` started (slurmds, slurmctld, munged); what was
    stopped. Other labs keep running."""
    d = lab_dir(home, name)
    stopped = []
    run = d / "run"
    if run.is_dir() and running_pid(run / "slurmctld.pid"):
        _cancel_jobs(d)
    if run.is_dir():
        for pidfile in sorted(run.glob("slurmd.*.pid")):
            if running_pid(pidfile):
                stop(pidfile, d, 15.0)
                stopped.append(pidfile.name.removesuffix(".pid"))
        if running_pid(run / "slurmctld.pid"):
            stop_controller(d)
            stopped.append("slurmctld")
    if running_pid(d / "munge" / "munged.pid"):
        stop(d / "munge" / "munged.pid", d, 10.0)
        stopped.append("munged")
    for pid in lab_processes(d):  # job steps a stopped slurmd left behind
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


def lab_versions(home: Path, name: str = CLUSTER) -> dict[str, dict[str, str]]:
    """What the lab's hook recorded: node -> component -> version (latest install wins)."""
    out: dict[str, dict[str, str]] = {}
    path = lab_dir(home, name) / "versions.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out.setdefault(rec["node"], {})[rec["component"]] = rec["version"]
    return out
