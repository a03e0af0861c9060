"""Calibrated randomness of the simulated fleet: job mix, failures, update durations and outcomes.

Everything random is drawn from ``random.Random`` seeded by a string naming the draw (fleet seed,
cluster, sequence number), so the same seed gives the same fleet whatever order processes touch it.
Figures come from DOMAIN.md: about one failure per 50,000 GPU-hours with a cause mix shaped like
the 419 unexpected interruptions of Llama 3 pre-training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from orchestrator.contracts.updates import (  # noqa: F401  (re-exported: the fleet's view of updates)
    REBOOT_HOURS,
    VERIFY_HOURS,
    maintenance_hours,
    order_updates,
    pending_components,
    update_catalog,
)

FAILURES_PER_GPU_HOUR = 1 / 50_000
#: Measured AllGather bandwidth of a healthy host as a fraction of roofline; the verification
#: threshold sits between healthy and degraded hosts.
HEALTHY_BUS_BW = 0.93
DEGRADED_BUS_BW = 0.62
MIN_BUS_BW = 0.85

#: (cause, weight = Llama 3 count, mean repair hours)
FAILURE_CAUSES: tuple[tuple[str, int, float], ...] = (
    ("faulty_gpu", 148, 48.0),
    ("gpu_hbm3", 72, 72.0),
    ("software_bug", 54, 2.0),
    ("network_switch_or_cable", 35, 6.0),
    ("unplanned_host_maintenance", 32, 24.0),
    ("gpu_sram", 19, 48.0),
    ("gpu_system_processor", 17, 12.0),
    ("nic", 7, 12.0),
    ("nccl_watchdog_timeout", 7, 1.0),
    ("silent_data_corruption", 6, 72.0),
    ("other", 22, 24.0),
)


@dataclass(frozen=True)
class ComponentRisk:
    """How installing one component can go wrong on a simulated host."""

    transient_failure: float  # the install step fails but a retry may succeed
    permanent_failure: float  # the host is left broken and must be quarantined
    bad_return: float  # looks fine, but verification finds a slow GPU or low bandwidth


RISKS: dict[str, ComponentRisk] = {
    "bmc": ComponentRisk(0.02, 0.002, 0.0),
    "bios": ComponentRisk(0.02, 0.003, 0.004),
    "os": ComponentRisk(0.01, 0.001, 0.003),
    "gpu_firmware": ComponentRisk(0.02, 0.003, 0.006),
    "nic_firmware": ComponentRisk(0.01, 0.002, 0.006),
    "gpu_driver": ComponentRisk(0.01, 0.001, 0.003),
    "cuda": ComponentRisk(0.005, 0.0, 0.002),
    "switch_firmware": ComponentRisk(0.01, 0.001, 0.0),
}


def rng(seed: int, *parts: object) -> random.Random:
    """A generator for one named draw, independent of every other draw."""
    return random.Random(":".join([str(seed), *map(str, parts)]))


@dataclass(frozen=True)
class JobShape:
    hosts: int
    duration_hours: float
    checkpoint_interval_hours: float


def draw_job(seed: int, cluster: str, seq: int, max_hosts: int) -> JobShape:
    """A job from the trace: many small jobs, some of hundreds of hosts, a few of 1,000+."""
    r = rng(seed, cluster, "job", seq)
    u = r.random()
    if u < 0.55:
        hosts = r.choice((1, 1, 2, 2, 4))
        duration = r.lognormvariate(1.6, 0.7)  # ~5 h median
    elif u < 0.85:
        hosts = r.choice((8, 16, 16, 32))
        duration = r.lognormvariate(2.3, 0.6)  # ~10 h
    elif u < 0.97:
        hosts = r.choice((64, 128, 256))
        duration = r.lognormvariate(3.2, 0.5)  # ~1 day
    else:
        hosts = r.choice((512, 1024, 2048))
        duration = r.lognormvariate(4.0, 0.4)  # ~2-3 days
    hosts = max(1, min(hosts, max_hosts))
    interval = r.choice((0.5, 1.0, 1.0, 2.0)) if hosts < 64 else r.choice((0.5, 0.5, 1.0))
    return JobShape(hosts, max(0.5, min(duration, 14 * 24.0)), interval)


def next_failure_gap(seed: int, cluster: str, seq: int, hosts: int) -> float:
    """Hours until the next unexpected failure in a cluster of ``hosts`` hosts (Poisson)."""
    rate = hosts * 8 * FAILURES_PER_GPU_HOUR
    return rng(seed, cluster, "failgap", seq).expovariate(rate)


def draw_failure(seed: int, cluster: str, seq: int, hosts: list[str]) -> tuple[str, str, float]:
    """Which host fails, why, and how many hours its repair takes."""
    r = rng(seed, cluster, "fail", seq)
    host = hosts[r.randrange(len(hosts))]
    names = [c[0] for c in FAILURE_CAUSES]
    weights = [c[1] for c in FAILURE_CAUSES]
    cause = r.choices(names, weights)[0]
    mean = dict((c[0], c[2]) for c in FAILURE_CAUSES)[cause]
    return host, cause, mean * r.uniform(0.5, 1.5)


@dataclass(frozen=True)
class UpdateOutcome:
    ok: bool
    permanent: bool
    failed_component: str | None
    defect: str | None  # a subtle problem only verification will see


def draw_update_outcome(
    seed: int, host: str, attempt_key: str, components: list[str]
) -> UpdateOutcome:
    """Whether installing ``components`` on ``host`` succeeds, fails, or leaves a hidden defect."""
    r = rng(seed, host, "update", attempt_key)
    defect: str | None = None
    for c in components:
        p = RISKS[c]
        u = r.random()
        if u < p.permanent_failure:
            return UpdateOutcome(False, True, c, None)
        if u < p.permanent_failure + p.transient_failure:
            return UpdateOutcome(False, False, c, None)
        if defect is None and r.random() < p.bad_return:
            defect = r.choice(("slow_gpu", "low_bus_bandwidth", "xid_errors"))
    return UpdateOutcome(True, False, None, defect)
