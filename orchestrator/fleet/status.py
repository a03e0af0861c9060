"""Fleet-wide summaries: host counts by state and the versions present per component."""

from __future__ import annotations

from collections import Counter, defaultdict
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from orchestrator.contracts.backend import FleetBackend
from orchestrator.contracts.models import GPUS_PER_HOST


def fleet_status(
    fleet: FleetBackend, cluster: str | None = None, wall: datetime | None = None
) -> dict[str, Any]:
    """Advance the selected clusters to now and count hosts, GPUs, states, versions and jobs.

    A fleet opened read-only (``fleet status``) is advanced in memory only (``peek``)."""
    names = fleet.cluster_names()
    if cluster is not None:
        if cluster not in names:
            raise ValueError(
                f"cluster: unknown cluster {cluster!r} (known: {', '.join(names[:5])}...)"
            )
        names = [cluster]
    states: Counter[str] = Counter()
    versions: dict[str, Counter[str]] = defaultdict(Counter)
    jobs_running = busy = hosts_total = 0
    per_cluster: dict[str, dict[str, int]] = {}
    now = 0.0
    read_only = fleet.read_only  # opened to read only: peek, write nothing
    for name in names:
        with nullcontext(fleet.peek(name, wall)) if read_only else fleet.cluster(name, wall) as b:
            now = b.now
            hosts = [b.host(n) for n in b.host_names()]
            c_states = Counter(str(h.state) for h in hosts)
            states.update(c_states)
            for h in hosts:
                for comp, ver in h.versions.items():
                    versions[comp][ver] += 1
                busy += h.job_id is not None
            jobs_running += len(b.snapshot().jobs)
            hosts_total += len(hosts)
            per_cluster[name] = {"hosts": len(hosts), **c_states}
    switch_versions = fleet.switch_versions(None if cluster is None else names[0])
    return {
        "fleet_id": fleet.get_meta().get("fleet_id"),
        "preset": fleet.preset.name,
        "seed": fleet.seed,
        "speed": fleet.speed,
        "fleet_hours": round(now, 3),
        "clusters": len(names),
        "hosts_total": hosts_total,
        "gpus_total": hosts_total * GPUS_PER_HOST,
        "states": dict(sorted(states.items())),
        "versions": {c: dict(v.most_common()) for c, v in sorted(versions.items())},
        "switch_versions": switch_versions,
        "jobs_running": jobs_running,
        "utilisation": round(busy / hosts_total, 4) if hosts_total else 0.0,
        "per_cluster": per_cluster,
        "clock": _clock(fleet, names, now),
    }


def _clock(fleet: FleetBackend, names: list[str], now: float) -> dict[str, Any]:
    """Whether the fleet clock runs on by itself (a scaled clock keeps time with the wall
    clock, trains or not), and the last train of the selected clusters to end, if any."""
    last = fleet.last_closed("train-")
    ended = None
    if last is not None and last[2] in names:
        t, owner, cluster = last
        ended = {"train": owner, "cluster": cluster, "fleet_hours": round(t, 3)}
    return {"runs_on": fleet.speed > 0, "now_hours": round(now, 3), "last_train_ended": ended}
