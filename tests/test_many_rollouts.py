"""Several campaigns riding one train at once (issue 12): what the train takes and installs.

Pure rules of ``planning.rollout`` first, then the train's real ``plan_domain`` activity over
a real SQLite fleet: a host gets the train's own targets with every rollout covering it over
them (arrival order, the later one winning), a domain's hosts all get the same, a canary's
targets never reach a host outside it nor the cluster's recorded targets, and a live change
adds, replaces or clears one campaign's rollout, leaving the others.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.fleet_activities import FleetActivities
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.train_spec import Rollout, TrainSpec, riding
from orchestrator.contracts.train_types import PlanDomainRequest, TrainChange, TrainInput
from orchestrator.contracts.views import HostView
from orchestrator.fleet import SqliteFleet
from orchestrator.planning.rollout import RolloutScope, recorded_targets_of, rollout_choices
from orchestrator.train.ui import train_details
from tests.train_helpers import make_fleet

NIC = {"nic_firmware": "28.41.1000"}
BIOS = {"bios": "3.3"}


def _host(name: str, **versions: str) -> HostView:
    base = {"nic_firmware": "28.39.1002", "bios": "3.1"}
    return HostView(name, "r0", "z0", "in_service", due=True, versions={**base, **versions})


def test_two_whole_cluster_rollouts_give_every_pending_host_both() -> None:
    """NIC firmware half done, then a BIOS: every host lacks the BIOS, each gets both."""
    hosts = [_host("a", **NIC), _host("b", **NIC), _host("c"), _host("d")]
    nic, bios = RolloutScope.of(NIC, None, False), RolloutScope.of(BIOS, None, False)
    [choice] = rollout_choices(hosts, [nic, bios])
    assert [h.name for h in choice.hosts if h.due] == ["a", "b", "c", "d"]
    assert choice.targets == {**NIC, **BIOS} and choice.pending == 4
    assert recorded_targets_of({"os": "6.8"}, [nic, bios]) == {"os": "6.8", **NIC, **BIOS}


def test_a_later_rollout_wins_on_a_component_both_change() -> None:
    first, later = RolloutScope.of({"bios": "3.2"}, None, False), RolloutScope.of(BIOS, None, False)
    [choice] = rollout_choices([_host("a")], [first, later])
    assert choice.targets == BIOS


def test_a_canary_stays_a_canary_beside_a_whole_cluster_rollout() -> None:
    """Canary hosts get the canary's targets too; the others never do, nor the record."""
    hosts = [_host("a"), _host("b"), _host("c")]
    nic, canary = RolloutScope.of(NIC, None, False), RolloutScope.of(BIOS, ["a"], False)
    choices = rollout_choices(hosts, [nic, canary])
    by_due = {tuple(h.name for h in c.hosts if h.due): c.targets for c in choices}
    assert by_due == {("b", "c"): NIC, ("a",): {**NIC, **BIOS}}  # the larger set first
    assert [h.name for h in choices[0].hosts if h.due] == ["b", "c"]
    assert recorded_targets_of({}, [nic, canary]) == NIC
    # Both done: the train's own cycle goes on with the NIC, leaving the canary host alone.
    done = [_host("a", **NIC, **BIOS), _host("b", **NIC), _host("c", **NIC)]
    [rest] = rollout_choices(done, [nic, canary])
    assert [h.name for h in rest.hosts if h.due] == ["b", "c"] and rest.targets == NIC
    [idle] = rollout_choices(done, [RolloutScope.of(NIC, None, True), canary])
    assert not any(h.due for h in idle.hosts)


def test_a_live_change_adds_replaces_and_clears_one_campaigns_rollout() -> None:
    """The train's handler rule: one rollout per campaign, arrival order kept."""
    nic = Rollout(campaign="campaign-nic", stage="all", targets=NIC)
    bios = Rollout(campaign="campaign-bios", stage="all", targets=BIOS)
    assert [r.campaign for r in riding(nic, [bios])] == ["campaign-nic", "campaign-bios"]
    nic2 = nic.model_copy(update={"stage": "rest"})
    assert riding(nic, [bios, nic2])[0].stage == "rest"
    assert TrainChange(clear_rollout=True, rollout_campaign="campaign-bios").rollout_campaign
    spec = TrainSpec(cluster="c00", rollout=nic, rollouts=[bios])
    details = train_details(spec, TrainInput(spec=spec).state, {}, 3, None)
    assert "Rollout of campaign-nic" in details and "Rollout of campaign-bios" in details


def test_recorded_train_inputs_with_one_rollout_still_read() -> None:
    """A train input from before ``rollouts`` (one ``rollout``) deserializes and rides."""
    old: dict[str, Any] = {
        "spec": {
            "cluster": "c00",
            "rollout": {"campaign": "c", "stage": "s", "targets": NIC, "hosts": ["a"]},
            "rollout_only": True,
        }
    }
    inp = TrainInput.model_validate(old)
    assert [r.campaign for r in inp.spec.riding()] == ["c"] and inp.spec.rollouts == []


def _plan(acts: FleetActivities, rollouts: list[Rollout], owner: str = "train-c00") -> Any:
    return ActivityEnvironment().run(
        acts.plan_domain,
        PlanDomainRequest(
            cluster="c00",
            owner=owner,
            wall=datetime.now(UTC),
            cycle_started_hours=0.0,
            max_held=8,
            budget=CapacityBudget(max_unavailable="10%"),
            max_wait_hours=4.0,
            targets={"os": "6.8.0-45"},
            rollouts=rollouts,
            rollout_only=True,
        ),
    )


def test_the_train_takes_one_set_of_covering_rollouts_per_domain(tmp_home: Path) -> None:
    """On the real fleet: a BIOS canary of 3 arrives beside a whole-cluster NIC rollout. Its
    hosts go first; domains never mix canary hosts with others, each gets what covers it, and
    the cluster's record keeps only the NIC."""
    path = make_fleet(tmp_home, 3600.0)
    fleet = SqliteFleet(path)
    try:
        names = sorted(fleet.peek("c00").host_names())
    finally:
        fleet.close()
    canary = names[:3]
    nic = Rollout(campaign="campaign-nic", stage="all", targets=NIC)
    bios = Rollout(campaign="campaign-bios", stage="canary", targets=BIOS, hosts=canary)
    acts = FleetActivities(path)
    seen: list[tuple[list[str], dict[str, str] | None]] = []
    for _ in range(6):
        res = _plan(acts, [nic, bios])
        if res.hosts:
            seen.append((res.hosts, res.targets))
        fleet = SqliteFleet(path)
        try:
            with fleet.cluster("c00") as sim:  # hand them back as visited, so more are taken
                for n in res.hosts:
                    sim.hosts[n].versions = {**sim.hosts[n].versions, **(res.targets or {})}
                    sim.dirty_hosts.add(n)
                    sim.release(n, "train-c00")
        finally:
            fleet.close()
    assert seen, "the train took nothing"
    assert set(seen[0][0]) <= set(canary), "the newest rollout's (the canary's) hosts go first"
    assert any(not set(h) & set(canary) for h, _ in seen), "the NIC rollout went on after"
    for hosts, targets in seen:
        inside = {n in canary for n in hosts}
        assert len(inside) == 1, f"a domain mixed canary and other hosts: {hosts}"
        want = {"os": "6.8.0-45", **NIC, **(BIOS if inside == {True} else {})}
        assert targets == want, (hosts, targets)
    fleet = SqliteFleet(path)
    try:
        recorded = fleet.peek("c00").state.targets
    finally:
        fleet.close()
    assert recorded.get("nic_firmware") == NIC["nic_firmware"] and "bios" not in recorded
