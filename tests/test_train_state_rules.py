"""The train's pure rules, outside any workflow: controls by phase, live changes, cycle totals.

``ClusterTrain`` delegates its validators, its ``reconfigure`` merge, its status and its cycle
bookkeeping to these functions; here they are checked directly (fast, no Temporal server).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.train_spec import Rollout, TrainSpec
from orchestrator.contracts.train_types import DomainResult, TrainChange, TrainState
from orchestrator.train.bookkeeping import finish_cycle, held_hosts, record_domain, release_hosts
from orchestrator.train.controls import (
    apply_settings,
    change_rollouts,
    change_single_rollout,
    require_phase,
)
from orchestrator.train.status import train_status

NIC = {"nic_firmware": "28.41.1000"}
BIOS = {"bios": "2.19.1"}


def test_controls_follow_the_phase() -> None:
    """A running train is not resumed (its failure count would reset); a stopping one takes
    another stop; a stopped one takes no pause."""
    with pytest.raises(ValueError, match="cannot resume a train that is running"):
        require_phase("running", "resume")
    require_phase("stopping", "stop")
    require_phase("halted", "resume")
    with pytest.raises(ValueError, match="cannot pause a train that is stopped"):
        require_phase("stopped", "pause")


def test_a_live_change_merges_targets_and_refuses_upper_layers() -> None:
    """Targets merge into the train's own; a driver target is refused, naming it."""
    spec = TrainSpec(cluster="c00", targets={"os": "6.12.0-9"})
    apply_settings(spec, TrainChange(targets=BIOS, domain_size=4))
    assert spec.targets == {"os": "6.12.0-9", **BIOS} and spec.domain_size == 4
    with pytest.raises(ValueError, match="gpu_driver"):
        apply_settings(spec, TrainChange(targets={"gpu_driver": "590.44.01"}))


def test_rollouts_keep_their_campaigns_and_order() -> None:
    """A ride replaces only its campaign's rollout in place; a named clear drops only that one;
    before many rollouts, a ride replaced whatever rode."""
    nic = Rollout(campaign="campaign-nic", stage="canary", targets=NIC)
    bios = Rollout(campaign="campaign-bios", stage="all", targets=BIOS)
    spec = TrainSpec(cluster="c00", rollout=nic, rollouts=[bios])
    change_rollouts(spec, TrainChange(rollout=nic.model_copy(update={"stage": "rest"})))
    assert [(r.campaign, r.stage) for r in spec.rollouts] == [
        ("campaign-nic", "rest"),
        ("campaign-bios", "all"),
    ]
    assert spec.rollout is None
    change_rollouts(spec, TrainChange(clear_rollout=True, rollout_campaign="campaign-nic"))
    assert [r.campaign for r in spec.rollouts] == ["campaign-bios"]
    old = TrainSpec(cluster="c00", rollout=nic)
    change_single_rollout(old, TrainChange(rollout=bios))
    assert old.rollout == bios


def test_a_cycle_ends_with_its_lengths_and_the_next_begins() -> None:
    """Finishing a cycle records its fleet and wall length and starts the next from now."""
    began = datetime(2026, 1, 1, tzinfo=UTC)
    st = TrainState(cycle_started_hours=10.0, cycle_started_wall=began, cycle_visits=5)
    st.counts = CycleCounts(hosts_total=4, visited=4, fleet_hours=34.0)
    finish_cycle(st, began + timedelta(minutes=3))
    assert (st.cycle, st.cycles_completed, st.last_cycle_fleet_hours) == (1, 1, 24.0)
    assert st.last_cycle_wall_seconds == 180.0 and st.cycle_visits == 0
    assert st.cycle_started_hours > 34.0 and st.cycle_started_wall == began + timedelta(minutes=3)


def test_domain_totals_and_handed_back_hosts() -> None:
    """A finished domain adds its visits and losses; hosts a domain handed back leave it."""
    st = TrainState()
    done = DomainResult(domain_id="d1", returned=["a", "b"], jobs_interrupted=1, lost_gpu_hours=2.5)
    record_domain(st, done)
    assert (st.visits_total, st.jobs_interrupted, st.lost_gpu_hours) == (2, 1, 2.5)
    flying = {"d1": ["a", "b", "c"], "d2": ["d"]}
    release_hosts(flying, "d1", ["b"])
    release_hosts(flying, "gone", ["d"])
    assert held_hosts(flying) == ["a", "c", "d"]


def test_status_projects_the_cycle_against_its_target() -> None:
    """Half the hosts settled in 10 fleet hours: the cycle ends at hour 20, within a 1d target."""
    spec = TrainSpec(cluster="c00", cycle_target_hours=24.0)
    st = TrainState(counts=CycleCounts(hosts_total=8, visited=4, fleet_hours=10.0))
    status = train_status(spec, st)
    assert status.cycle_projected_end_hours == 20.0 and status.cycle_on_track is True
    assert status.window_closes_at is None and status.hosts_visited_this_cycle == 4
