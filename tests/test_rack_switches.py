"""Rack-switch maintenance: a switch_firmware target visits whole racks (the switch's blast
radius), drained together, the switch updated, the hosts updated and verified in the same visit.

The end-to-end test runs a live train on the time-skipping server over a small test preset (4
racks of 4 hosts) and the simulator on the same fleet and seed; ``trainctl demo --preset small
--speed max --target switch_firmware=2.1.0 --target os=6.12.0-9`` does the same on ``small``
(the issue's figure, quoted in the note: too slow for the suite).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main as cli
from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.errors import BadSpec
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.train_types import TrainInput
from orchestrator.contracts.views import HostView
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.build import build_cluster
from orchestrator.fleet.presets import PRESETS, Preset, get_preset
from orchestrator.fleet.status import fleet_status
from orchestrator.planning.rack_plan import choose_rack, rack_fits_budget
from orchestrator.simulator import SimConfig
from orchestrator.simulator.engine import Engine
from tests.train_helpers import host_states, make_fleet, spec
from workflows.cluster_train import ClusterTrain

TARGETS = {"switch_firmware": "2.1.0", "os": "6.12.0-9"}
RACKS = PRESETS["small"].model_copy(
    update={
        "name": "racks",
        "description": "4 racks of 4 hosts (tests)",
        "racks_per_zone": 2,
        "hosts_per_rack": 4,
        "max_job_hosts": 8,
    }
)


@pytest.fixture
def racks(monkeypatch: pytest.MonkeyPatch) -> Preset:
    monkeypatch.setitem(PRESETS, "racks", RACKS)
    return RACKS


def test_a_rack_is_taken_whole_past_per_rack():
    """The planner takes every in-service host of the rack that interrupts least, per_rack
    aside; a host in repair costs nothing; a rack held by someone else is skipped."""
    hosts = [
        HostView("a1", "ra", "z", "in_service", job_id=1),
        HostView("a2", "ra", "z", "in_service"),
        HostView("b1", "rb", "z", "in_service"),
        HostView("b2", "rb", "z", "in_repair", owner="repair"),
        HostView("c1", "rc", "z", "cordoned", owner="ops-x"),
        HostView("c2", "rc", "z", "in_service"),
    ]
    switches = {"ra": "1.0", "rb": "1.0", "rc": "1.0"}
    plan = choose_rack(
        hosts, {}, switches, "2.1.0", limit=4, maintenance=4, now=0, max_wait_hours=4
    )
    assert (plan.rack, plan.hosts, plan.due_racks) == ("rb", ["b1"], 3)
    done = choose_rack(hosts, {}, dict.fromkeys(switches, "2.1.0"), "2.1.0", 4, 4, 0, 4)
    assert done.rack is None and done.due_racks == 0


def test_rack_larger_than_the_budget_is_refused_up_front(tmp_home: Path):
    """A budget below one rack is refused before anything starts, naming the budget (exit 2)."""
    why = rack_fits_budget(CapacityBudget(max_unavailable="3%"), 128, 8)
    assert why.startswith("budget.max_unavailable:") and "3%" in why and "8 hosts" in why
    assert rack_fits_budget(CapacityBudget(max_unavailable=8), 128, 8) == ""
    planned = rack_fits_budget(CapacityBudget(max_unavailable=12, maintenance=4), 128, 8)
    assert planned.startswith("budget.maintenance:")
    make_fleet(tmp_home, 1.0)
    spec_file = tmp_home / "train.json"
    spec_file.write_text(
        json.dumps({"cluster": "c00", "targets": TARGETS, "budget": {"max_unavailable": "3%"}})
    )
    res = CliRunner().invoke(cli, ["train", "start", "--spec", str(spec_file), "--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)
    assert err["field"] == "budget.max_unavailable" and "switch_firmware" in err["error"]


def test_switch_firmware_is_never_a_host_component():
    """A host-level switch_firmware install is refused; a train's install leaves it to the
    switch, and verification checks the host's rack switch instead."""
    sim = build_cluster(get_preset("small"), 1)
    host = next(h for h in sim.hosts.values() if h.job_id is None)
    with pytest.raises(BadSpec, match="switch_firmware"):
        sim.install(host.name, {"switch_firmware": "2.1.0"}, "test", "0")
    sim.apply_updates(host.name, dict(TARGETS), "test", "0")
    assert "switch_firmware" not in host.versions and host.versions["os"] == TARGETS["os"]
    assert "switch_firmware" in sim._diagnose(host, TARGETS)[1]  # its switch is not on 2.1.0


def test_fleet_status_counts_switch_versions(tmp_home: Path):
    """fleet status reports firmware per switch kind; an updated rack switch shows there."""
    path = make_fleet(tmp_home, 1.0)
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            rack = sorted(sim.rack_switches())[0]
            for name in sim.rack_hosts(rack):
                h = sim.hosts[name]
                if h.job_id is not None:
                    sim.evict(h.job_id, "test")
                sim.cordon(name, "test", "test", 128)
            assert sim.update_switch(rack, "2.1.0", "test") == ""
        status = fleet_status(fleet)
    finally:
        fleet.close()
    assert status["switch_versions"]["rack"] == {"EOS-4.31.2F": 15, "2.1.0": 1}
    assert status["switch_versions"]["spine"] == {"EOS-4.31.2F": 8}
    assert status["switch_versions"]["aggregation"] == {"EOS-4.31.2F": 4}


def _racks_taken(events) -> Counter[str]:
    return Counter(e.detail["rack"] for e in events if e.kind == "rack_taken")


async def test_train_updates_every_rack_switch_once(temporal_env, tmp_home, task_queue, racks):
    """One cycle: every rack switch on 2.1.0, every host on the new os, each rack drained once
    for its switch, audit clean; the simulator agrees on the cycle's length and the visits."""
    train_spec = spec(
        stop_after_cycles=1, domain_size=4, targets=TARGETS, budget={"max_unavailable": 5}
    )
    seed = 2
    sim = build_cluster(racks, seed)
    engine = Engine(
        sim,
        SimConfig(
            preset=racks,
            budget=CapacityBudget(max_unavailable=5),
            domain_size=4,
            seed=seed,
            targets=dict(TARGETS),
            halt_after_failures=train_spec.halt_after_failures,
        ),
    )
    simulated = engine.run()
    assert simulated.complete and set(sim.switches.values()) == {"2.1.0"}

    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time(), seed, "racks")
    async with build_worker(temporal_env.client, path, task_queue):
        live = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-racks-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert live.cycles_completed == 1
    fleet = SqliteFleet(path)
    try:
        events = [ev for _, ev, _ in fleet.events()]
        report = audit(fleet)
        switches = fleet.switch_versions("c00")
    finally:
        fleet.close()
    assert report.ok, report.violations[:3]
    assert switches["rack"] == {"2.1.0": 4}
    assert _racks_taken(events) == dict.fromkeys(sorted(sim.rack_switches()), 1)
    assert Counter(e.detail["rack"] for e in events if e.kind == "switch_updated") == dict.fromkeys(
        sorted(sim.rack_switches()), 1
    )
    for name, (state, _, versions) in host_states(path).items():
        assert versions["os"] == TARGETS["os"] or state != "in_service", name
        assert "switch_firmware" not in versions
    assert live.hosts_visited_this_cycle == simulated.hosts_visited
    assert live.last_cycle_fleet_hours == pytest.approx(simulated.makespan_hours, rel=0.05)
