"""What maintenance costs jobs: one cost model whose parts are disjoint, non-negative and add up
to the total, and a restart and checkpoint model pinned to public figures.

Small presets and short horizons; the Llama 3 calibration is ``test_simulator_horizon``'s.
"""

from __future__ import annotations

import pytest

from orchestrator.contracts.train_spec import POLICIES
from orchestrator.fleet.presets import get_preset
from orchestrator.planning.cost import PARTS, CostLedger, RestartModel, usable_hosts
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.yardstick import simulate_judged


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_policys_parts_are_non_negative_and_add_up_to_its_cost(seed: int) -> None:
    """On ``small`` over 4 days with a new version every 2, every policy's cost is the sum of
    its non-negative parts, and the residual against the baseline is what the parts leave."""
    for policy in POLICIES:
        cfg = SimConfig(
            preset=get_preset("small"),
            policy=policy,
            seed=seed,
            horizon_hours=96.0,
            target_every_hours=48.0,
            cycle_target_hours=72.0,
        )
        rep = simulate_judged(cfg).horizon_report
        assert rep is not None
        parts = rep["cost_parts"]
        assert set(parts) == set(PARTS)
        assert all(v >= 0 for v in parts.values()), (policy, parts)
        assert sum(parts.values()) == pytest.approx(rep["maintenance_cost_gpu_hours"], abs=0.5)
        if policy == "rolling-serial":  # evicts at once: its stops always cost something
            assert rep["cost_parts"]["lost_work"] + rep["cost_parts"]["restart"] > 0
        assert rep["residual_gpu_hours"] == pytest.approx(
            rep["baseline_difference_gpu_hours"] - rep["maintenance_cost_gpu_hours"], abs=0.2
        )


def test_a_maintenance_stop_costs_its_lost_work_and_one_restart_whatever_the_job_size() -> None:
    """A stop maintenance caused charges its owner the work since the checkpoint and the pinned
    restart by all the job's GPUs; a failure's stop charges nobody."""
    ledger = CostLedger(RestartModel(restart_hours=0.5))
    ledger.stop({"cause": "maintenance:train-c00", "hosts": 4, "lost_gpu_hours": 12.0})
    ledger.stop({"cause": "failure:faulty_gpu", "hosts": 4, "lost_gpu_hours": 99.0})
    ledger.stop({"cause": "maintenance:ops-r1", "hosts": 400, "lost_gpu_hours": 0.0})
    assert ledger.by_owner["train-c00"]["lost_work"] == 12.0
    assert ledger.by_owner["train-c00"]["restart"] == 0.5 * 4 * 8
    assert ledger.by_owner["ops-r1"]["restart"] == 0.5 * 400 * 8
    assert ledger.total() == pytest.approx(12.0 + 16.0 + 1600.0)


def test_a_stop_on_slurm_that_names_its_nodes_costs_as_one_that_counts_them() -> None:
    """Slurm's record names a stopped job's nodes where the simulated fleet counts them: the
    same restart either way."""
    counted, named = CostLedger(RestartModel(restart_hours=0.5)), CostLedger(RestartModel(0.5))
    counted.stop({"cause": "maintenance:train-lab", "hosts": 3, "lost_gpu_hours": 1.0})
    named.stop(
        {"cause": "maintenance:train-lab", "hosts": ["h01", "h02", "h03"], "lost_gpu_hours": 1.0}
    )
    assert named.by_owner == counted.by_owner and named.total() == pytest.approx(1.0 + 12.0)


def test_held_hosts_cost_only_what_a_queued_job_that_fits_could_have_used() -> None:
    """Held hosts no queued job fits in, or past the scheduler's room, cost nothing."""
    assert usable_hosts(8, 0, [16], room=100) == 0.0  # the job does not fit in 8
    assert usable_hosts(8, 2, [4, 4], room=100) == 6.0  # 2 idle hosts first, then 2 + 4 held
    assert usable_hosts(8, 20, [4], room=100) == 0.0  # fits in the idle hosts: not waiting
    assert usable_hosts(8, 0, [4, 4], room=3) == 4.0  # the head may start past the room
    assert usable_hosts(8, 2, [4], room=0) == 0.0  # at its target the scheduler starts none
    ledger = CostLedger()
    ledger.hold("train-c00", 2.0, working=3, waiting=5, usable=4.0)
    assert ledger.by_owner["train-c00"]["held_idle"] == 2.0 * 3 * 8
    assert ledger.by_owner["train-c00"]["drain_wait"] == 2.0 * 1 * 8
