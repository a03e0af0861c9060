"""Calibrated randomness of the simulated fleet: job mix, failures, update durations and outcomes.

Everything random is drawn from ``random.Random`` seeded by a string naming the draw (fleet seed,
cluster, sequence number), so the same seed gives the same fleet whatever order processes touch it.
Figures come from DOMAIN.md: about one failure per 50,000 GPU-hours with a cause mix shaped like
the 419 unexpected interruptions of Llama 3 pre-training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from orchestrator.models import Component, Update

FAILURES_PER_GPU_HOUR = 1 / 50_000
REBOOT_HOURS = 0.25
VERIFY_HOURS = 0.5
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
class ComponentProfile:
    """How updating one component behaves on a host."""

    duration_hours: float
    needs_reboot: bool
    depends_on: tuple[str, ...]
    transient_failure: float  # the install step fails but a retry may succeed
    permanent_failure: float  # the host is left broken and must be quarantined
    bad_return: float  # looks fine, but verification finds a slow GPU or low bandwidth


PROFILES: dict[str, ComponentProfile] = {
    "bmc": ComponentProfile(0.25, True, (), 0.02, 0.002, 0.0),
    "bios": ComponentProfile(0.35, True, ("bmc",), 0.02, 0.003, 0.004),
    "os": ComponentProfile(0.5, True, (), 0.01, 0.001, 0.003),
    "gpu_firmware": ComponentProfile(0.5, True, ("bmc",), 0.02, 0.003, 0.006),
    "nic_firmware": ComponentProfile(0.2, True, (), 0.01, 0.002, 0.006),
    "gpu_driver": ComponentProfile(0.25, True, ("os",), 0.01, 0.001, 0.003),
    "cuda": ComponentProfile(0.15, False, ("gpu_driver",), 0.005, 0.0, 0.002),
    "switch_firmware": ComponentProfile(0.5, True, (), 0.01, 0.001, 0.0),
}


def order_updates(components: list[str]) -> list[str]:
    """Order components so each comes after those it depends on (BMC before BIOS, ...)."""
    ordered: list[str] = []
    pending = set(components)

    def visit(c: str) -> None:
        if c in ordered:
            return
        for dep in PROFILES[c].depends_on:
            if dep in pending:
                visit(dep)
        ordered.append(c)

    for comp in sorted(components):
        visit(comp)
    return ordered


def update_catalog(targets: dict[str, str]) -> list[Update]:
    """The Update records for a target set, in dependency order."""
    return [
        Update(
            component=Component(c),
            target=targets[c],
            duration_hours=PROFILES[c].duration_hours,
            needs_reboot=PROFILES[c].needs_reboot,
            depends_on=[Component(d) for d in PROFILES[c].depends_on],
        )
        for c in order_updates(list(targets))
    ]


def pending_components(versions: dict[str, str], targets: dict[str, str]) -> list[str]:
    return order_updates([c for c, v in targets.items() if versions.get(c) != v])


def maintenance_hours(components: list[str]) -> float:
    """Fleet time to install ``components`` with one reboot, plus verification."""
    if not components:
        return VERIFY_HOURS
    install = sum(PROFILES[c].duration_hours for c in components)
    reboot = REBOOT_HOURS if any(PROFILES[c].needs_reboot for c in components) else 0.0
    return install + reboot + VERIFY_HOURS


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
        p = PROFILES[c]
        u = r.random()
        if u < p.permanent_failure:
            return UpdateOutcome(False, True, c, None)
        if u < p.permanent_failure + p.transient_failure:
            return UpdateOutcome(False, False, c, None)
        if defect is None and r.random() < p.bad_return:
            defect = r.choice(("slow_gpu", "low_bus_bandwidth", "xid_errors"))
    return UpdateOutcome(True, False, None, defect)
