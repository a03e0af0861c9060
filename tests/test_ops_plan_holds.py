"""Operations' plans hold when they run: interruptions in the plan's range, the plan's waves.

Twenty seeded operations (a CUDA upgrade of zone z00 of each of ``multi``'s four clusters, five
seeds), each planned as ``ops plan`` plans it, then run on the time-skipping server with the
fleets at speed 1 (its clock is the workflows' clock, so new jobs arrive and old ones end while
the waves run). The measurement and its printout are ``benchmarks/bench_ops_plan_holds.py``'s.

The ranges hold 18 of the 20 counts today; the two outside miss by one job (new jobs the
forecast expected fewer of), which is what the second assertion bounds.
"""

from __future__ import annotations

from benchmarks.bench_ops_plan_holds import line, mae_share, run_seeds
from tests.e2e import audit_ok

SEEDS = 5


async def test_twenty_operations_interrupt_within_their_ranges_in_the_planned_waves(
    temporal_env, tmp_home, task_queue
):
    """Counts in their ranges, midpoints within 30%, the plan's waves unless something the
    plan could not know happened, and then every re-plan with its reason."""
    outcomes = await run_seeds(temporal_env, tmp_home, SEEDS, task_queue)
    assert len(outcomes) == 4 * SEEDS
    assert all(o.high <= 2 * o.low + 2 for o in outcomes)
    outside = [o for o in outcomes if not o.inside]
    assert len(outside) <= 2, [line(o) for o in outside]
    assert all(o.low - 1 <= o.interrupted <= o.high + 1 for o in outside), [
        line(o) for o in outside
    ]
    assert mae_share(outcomes) <= 0.30
    for o in outcomes:
        if not o.unplanned:  # nothing to re-plan for: the plan's waves, as planned
            assert (o.waves_run, o.replans) == (o.waves_planned, []), line(o)
        elif o.waves_run != o.waves_planned:  # a re-plan, with its reason
            assert o.replans, line(o)
    for seed in range(1, SEEDS + 1):
        audit_ok(tmp_home / f"fleet-{seed}.db")
