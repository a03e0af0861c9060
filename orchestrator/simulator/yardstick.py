"""How a schedule is judged: a policy over a fixed horizon against the ``none`` baseline.

One call runs the policy and, on a fresh cluster of the same preset, seed and horizon, the
baseline with no train (same trace, failures and repairs; the trace is drawn as the scheduler
needs jobs, so where the two runs differ is what maintenance did). What maintenance cost
the users is measured in the policy's run, part by part (``planning.cost``):
``maintenance_cost_gpu_hours`` is the sum of ``cost_parts``, each non-negative. Beside it, as a
check, ``baseline_difference_gpu_hours`` = goodput(none) - goodput(policy), and
``residual_gpu_hours``, the difference less the cost: the drift of two schedules apart (jobs
packed differently, failures landing on other jobs), which can have either sign.
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
    """``policy`` with the baseline's figures and the difference of goodputs added beside its
    own cost (the sum of its parts), and what of that difference the parts do not explain."""
    rep, base = policy.horizon_report, baseline.horizon_report
    assert rep is not None and base is not None
    difference = float(base["goodput_gpu_hours"]) - float(rep["goodput_gpu_hours"])
    cost = float(rep["maintenance_cost_gpu_hours"])
    work = float(rep["maintenance_work_gpu_hours"])
    added: dict[str, Any] = {
        "cost_over_work": round(cost / work, 4) if work > 0 else None,
        "baseline_difference_gpu_hours": round(difference, 1),
        # Two schedules drift apart (jobs packed differently, failures landing on other jobs):
        # the difference less the measured parts is that drift, not a cost.
        "residual_gpu_hours": round(difference - cost, 1),
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
