"""The train's bookkeeping between its commands: totals, cycles and the hosts its domains hold.

What the workflow folds into its state when a domain reports or ends and when a cycle
completes: plain arithmetic over ``TrainState`` and the ``domain -> hosts`` map, with the
workflow's time passed in, so it is deterministic and tested without a workflow. The workflow
keeps the commands and the log lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import (
    RECENT_FAILURES,
    DomainProgress,
    DomainResult,
    PlanDomainResult,
    TrainState,
)
from orchestrator.execution.batches import domain_size_now, judge_batch


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
    """Count a completed cycle and start the next at once (runs from before resting)."""
    close_cycle(st, now)
    begin_cycle(st, st.counts.fleet_hours + 1e-6, now)


def close_cycle(st: TrainState, now: datetime) -> None:
    """Count a completed cycle: its fleet and wall length."""
    st.cycles_completed += 1
    st.last_cycle_fleet_hours = st.counts.fleet_hours - st.cycle_started_hours
    assert st.cycle_started_wall is not None
    st.last_cycle_wall_seconds = (now - st.cycle_started_wall).total_seconds()


def rest(st: TrainState, now: datetime) -> None:
    """Count a completed cycle and rest: the next starts when a host needs a visit."""
    close_cycle(st, now)
    st.resting = True


def begin_cycle(st: TrainState, started_hours: float, now: datetime) -> None:
    """Start the next cycle at fleet hour ``started_hours``: every serving host due again."""
    st.cycle += 1
    st.cycle_started_hours = started_hours
    st.cycle_started_wall = now
    st.cycle_visits = st.cycle_failures = 0
    st.resting, st.rest_until_hours = False, None


def note_plan(st: TrainState, res: PlanDomainResult, now: datetime) -> None:
    """What a plan under the visit rule tells the train: hosts checked in place, its rest and
    when a health visit ends it, or the next cycle begun (something needs a visit)."""
    st.checked_total += len(res.checked)
    if res.cost is not None:
        st.cost = res.cost
    if res.cycle_started_hours is not None:
        begin_cycle(st, res.cycle_started_hours, now)
    elif res.resting:
        st.rest_until_hours = res.rest_until_hours


def fold_batch(spec: TrainSpec, st: TrainState, result: DomainResult) -> str:
    """With a ``batch`` policy: the next domain's size after this one, and '' or why failed
    domains in a row stop the train (``orchestrator.execution.batches``)."""
    if spec.batch is None:
        return ""
    failed = len(result.quarantined) + len(result.lost_to_repair)
    done = st.counts.visited / max(1, st.counts.hosts_total)
    asked = domain_size_now(spec.domain_size, spec.batch, st.batch_size)
    verdict = judge_batch(
        spec.batch, asked, len(result.returned), failed, st.batch_failures_in_row, done
    )
    st.batch_size, st.batch_failures_in_row = verdict.next_size, verdict.failures_in_row
    return verdict.stop
