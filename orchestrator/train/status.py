"""The train's ``status`` answer, built from its spec and state alone.

The ``status`` query and every control update answer with it, and the client prints it: a pure
function of the data the workflow carries across continue-as-new, so it is tested without a
workflow and the workflow keeps only its steps. No command depends on it.
"""

from __future__ import annotations

from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainState, TrainStatus
from orchestrator.execution.batches import domain_size_now
from orchestrator.execution.cycle import project_cycle_end, visited_this_cycle


def train_status(spec: TrainSpec, st: TrainState, held: int | None = None) -> TrainStatus:
    """What ``train status`` shows: phase, cycle figures and projection, budget, windows.

    ``held``: the hosts the train's domains hold now (the workflow knows), shown as in
    maintenance rather than its last plan's count, which goes stale while it plans nothing (a
    window closed with ``hard_stop`` hands every domain's hosts back at once).
    """
    end, on_track = project_cycle_end(
        st.counts, st.cycle_started_hours, spec.cycle_target_hours, st.resting
    )
    total = st.counts.hosts_total
    # A stopped train has handed every host back and waits for nothing: what its last plan
    # said (hosts held, "handing over to ops-...") is history, not where it stands.
    ended = st.phase == "stopped"
    return TrainStatus(
        cycle_target_hours=spec.cycle_target_hours,
        cycle_projected_end_hours=None if end is None else round(end, 3),
        cycle_on_track=on_track,
        cycle_started_hours=None if st.resting else st.cycle_started_hours,
        max_unavailable_hosts=spec.budget.limit(total),
        maintenance_hosts=spec.budget.maintenance_limit(total),
        cluster=spec.cluster,
        state=st.phase,
        reason=st.reason,
        recent_failures=list(st.recent_failures),
        cycles_completed=st.cycles_completed,
        hosts_total=st.counts.hosts_total,
        hosts_visited_this_cycle=visited_this_cycle(st.counts),
        in_maintenance=0 if ended else st.counts.in_flight if held is None else held,
        quarantined=st.counts.quarantined,
        in_repair=st.counts.in_repair,
        hosts_visited_now_out=st.counts.visited_now_out,
        domain_size=domain_size_now(spec.domain_size, spec.batch, st.batch_size),
        budget=spec.budget,
        targets=spec.targets,
        waiting="" if ended else st.waiting,
        visits_total=st.visits_total,
        jobs_interrupted=st.jobs_interrupted,
        lost_gpu_hours=round(st.lost_gpu_hours, 3),
        fleet_hours=st.counts.fleet_hours,
        last_cycle_fleet_hours=st.last_cycle_fleet_hours,
        last_cycle_wall_seconds=st.last_cycle_wall_seconds,
        rollout=spec.rollout or next(iter(spec.rollouts), None),
        rollouts=spec.riding(),
        rollout_only=spec.rollout_only,
        negotiations={j: t for talks in st.negotiations.values() for j, t in talks.items()},
        resting=st.resting and not ended,
        rest_until_hours=st.rest_until_hours if st.resting and not ended else None,
        checked_total=st.checked_total,
        cost=st.cost,
        window_state=st.window_state,
        next_window_start=st.next_window_start if st.window_state != "open" else None,
        window_closes_at=st.window_closes_at if st.window_state == "open" else None,
        time_zone=spec.schedule.time_zone if spec.schedule else "",
    )


def visit_figures(status: TrainStatus) -> tuple[int, int]:
    """Hosts visited this cycle, and those quarantined or in repair without a visit this cycle:
    the one source of both for the demo's progress lines and its summary (the last line said
    ``128/128 visited, 0 quarantined`` beside a summary of ``126/128 ... 2 quarantined or in
    repair``). Each host counts once: a visited host that went to repair stays visited (the
    count never drops within a cycle), so the two never add up to more hosts than there are."""
    out = status.quarantined + status.in_repair - status.hosts_visited_now_out
    return status.hosts_visited_this_cycle, out
