"""How a schedule is judged: a policy over a fixed horizon against the ``none`` baseline.

One call runs the policy and, on a fresh cluster of the same preset, seed and horizon, the
baseline with no train (same trace, failures and repairs; the trace is drawn as the scheduler
needs jobs, so where the two runs differ is what maintenance did). What users lost is the
baseline's goodput minus the policy's:

- ``maintenance_cost_gpu_hours`` = goodput(none) - goodput(policy);
- ``cost_parts``: ``lost_work`` (work since the checkpoint of every job maintenance stopped) and
  ``restart`` (the restart each such stop made its job pay, ``base + per_host x hosts`` by
  all its GPUs, as far as it got before the next stop or the horizon) are measured in the
  policy's run; the rest of the difference is capacity, split into
  ``held_idle`` (hosts installing and verifying) and ``drain_wait`` (hosts held idle while the
  rest of their domain drains or, lockstep, finishes) in proportion to the
  GPU-hours of each in the run (``held_gpu_hours``). The parts add up to the cost; capacity can
  come out negative when maintenance happened to leave room for a better packing of big jobs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.engine import simulate
from orchestrator.simulator.policies import NONE
from orchestrator.simulator.result import SimResult


def baseline_config(cfg: SimConfig) -> SimConfig:
    return dataclasses.replace(cfg, policy=NONE, series=False)


def judged(policy: SimResult, baseline: SimResult) -> SimResult:
    """``policy`` with the costs against ``baseline`` added to its horizon report."""
    rep, base = policy.horizon_report, baseline.horizon_report
    assert rep is not None and base is not None
    cost = float(base["goodput_gpu_hours"]) - float(rep["goodput_gpu_hours"])
    parts = dict(rep["_parts"])
    # What is not lost work or restarts is capacity: split between hosts in maintenance and
    # hosts held idle in a draining domain, in proportion to their GPU-hours in this run.
    capacity = cost - parts["lost_work"] - parts["restart"]
    held, waiting = float(parts["in_maintenance"]), float(parts["drain_wait"])
    share = waiting / (held + waiting) if held + waiting > 0 else 0.0
    cost_parts = {
        "held_idle": round(capacity * (1.0 - share), 1),
        "drain_wait": round(capacity * share, 1),
        "lost_work": parts["lost_work"],
        "restart": parts["restart"],
    }
    work = float(rep["maintenance_work_gpu_hours"])
    added: dict[str, Any] = {
        "maintenance_cost_gpu_hours": round(cost, 1),
        "cost_parts": cost_parts,
        "cost_over_work": round(cost / work, 4) if work > 0 else None,
        "held_gpu_hours": {"in_maintenance": held, "drain_wait_idle": waiting},
        "baseline": {
            "policy": NONE,
            "goodput_gpu_hours": base["goodput_gpu_hours"],
            "utilisation": baseline.utilisation and round(baseline.utilisation, 4),
            "ettr": base["ettr"],
            "failure_interruptions": base["failure_interruptions"],
            "wall_seconds": round(baseline.wall_seconds, 3),
        },
    }
    policy.horizon_report = {**rep, **added}
    return policy


def simulate_judged(cfg: SimConfig, sim: ClusterSim | None = None) -> SimResult:
    """``cfg``'s run over its horizon, judged against the ``none`` baseline (the baseline on its
    own when ``cfg`` is ``none``: its cost is 0 by definition)."""
    assert cfg.horizon_hours is not None
    res = simulate(cfg, sim)
    if cfg.policy == NONE:
        base = res
    else:
        fresh = build_cluster(cfg.preset, cfg.seed, cfg.cluster)
        base = simulate(baseline_config(cfg), fresh)
    return judged(res, base)
