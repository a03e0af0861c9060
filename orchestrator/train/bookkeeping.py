"""The train's bookkeeping between its commands: totals, cycles and the hosts its domains hold.

What the workflow folds into its state when a domain reports or ends and when a cycle
completes: plain arithmetic over ``TrainState`` and the ``domain -> hosts`` map, with the
workflow's time passed in, so it is deterministic and tested without a workflow. The workflow
keeps the commands and the log lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from orchestrator.contracts.train_types import (
    RECENT_FAILURES,
    DomainProgress,
    DomainResult,
    TrainState,
)


def held_hosts(in_flight: Mapping[str, Sequence[str]]) -> list[str]:
    """Every host the train's domains hold, domain by domain."""
    return [h for hosts in in_flight.values() for h in hosts]


def release_hosts(in_flight: dict[str, list[str]], domain_id: str, released: Sequence[str]) -> None:
    """Hosts a domain handed back (their job refused) are no longer the domain's, so a host the
    fleet later cordons for us again (piggybacked) goes to the next domain, not left waiting."""
    if not released or domain_id not in in_flight:
        return
    gone = set(released)
    in_flight[domain_id] = [h for h in in_flight[domain_id] if h not in gone]


def record_domain(st: TrainState, result: DomainResult) -> None:
    """Totals from a finished domain (its failures were counted batch by batch)."""
    st.visits_total += len(result.returned)
    st.quarantined_total += len(result.quarantined)
    st.jobs_interrupted += result.jobs_interrupted
    st.lost_gpu_hours += result.lost_gpu_hours
    failed = [*sorted(result.quarantined.items()), *sorted(result.lost_to_repair.items())]
    if failed:
        st.recent_failures = [*st.recent_failures, *failed][-RECENT_FAILURES:]


def record_hand_back(st: TrainState, progress: DomainProgress) -> None:
    """Visits a domain reported as it handed its hosts back, cancelled (a ``hard_stop`` window
    closed) or failed: it ends without a result, so ``record_domain`` never counts them."""
    st.visits_total += len(progress.visited)


def finish_cycle(st: TrainState, now: datetime) -> None:
    """Count a completed cycle (its fleet and wall length) and start the next at ``now``."""
    st.cycles_completed += 1
    st.last_cycle_fleet_hours = st.counts.fleet_hours - st.cycle_started_hours
    assert st.cycle_started_wall is not None
    st.last_cycle_wall_seconds = (now - st.cycle_started_wall).total_seconds()
    st.cycle += 1
    st.cycle_started_hours = st.counts.fleet_hours + 1e-6
    st.cycle_started_wall = now
    st.cycle_visits = st.cycle_failures = 0
