"""An operation plans a wave once per decision point, and what it reuses is what it would plan.

``PlanMemo`` hands out a remembered plan instead of planning again (the look before the cut,
planned with the arbiter's grant; pre-staging after the first look); ``with_grants`` keeps the
CLI's plan when no grant binds. Each must equal the plan a fresh ``plan_operation`` makes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.contracts.ops_spec import OperationSpec
from orchestrator.execution.ops_take import PlanMemo, plan_one
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import parse_spec_text
from orchestrator.planning.ops_plan import plan_operation, with_grants

CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}


def _spec(**extra: Any) -> OperationSpec:
    body = {"kind": "cuda-upgrade", "scope": {"cluster": "c00"}, "targets": CUDA, **extra}
    return parse_spec_text(json.dumps(body))


SPECS = [
    _spec(budget={"max_unavailable": "25%"}),
    _spec(budget={"max_unavailable": 12, "per_rack": 3}),
    _spec(budget={"max_unavailable": "60%"}),
    _spec(consistency="cluster", window={"max_unavailable": "100%", "duration": "48h"}),
]


@pytest.fixture
def fleet(tmp_home: Path) -> SqliteFleet:
    fleet = SqliteFleet.create(tmp_home / "fleet.db", get_preset("small"), 7, MAX_SPEED)
    with fleet.cluster("c00") as sim:  # some hosts already out
        assert sim.cordon("c00-z00-r000-h00", "train-c00", "train-c00", limit=128)
        sim.quarantine("c00-z01-r007-h07", "test", "xid errors")
    return fleet


@pytest.mark.parametrize("spec", SPECS, ids=range(len(SPECS)))
@pytest.mark.parametrize("grant", [1, 3, 8, 12, 40])
def test_the_cut_reuses_the_look_only_as_it_would_plan(
    fleet: SqliteFleet, spec: OperationSpec, grant: int
) -> None:
    snap = fleet.peek("c00").snapshot()
    memo = PlanMemo()
    looked = memo.plan("op", spec, snap, 0.0, grant)
    assert looked == plan_one(spec, snap, 0.0, grant)
    cut = memo.plan("op", spec, snap, 0.0)  # the cut after the arbiter: no grant, same fleet
    assert cut == plan_one(spec, snap, 0.0)
    again = memo.plan("op", spec, snap, 0.0)
    assert again == cut and memo.planned + memo.reused == 3


def test_a_binding_grant_or_a_changed_fleet_plans_again(fleet: SqliteFleet) -> None:
    spec = SPECS[0]
    snap = fleet.peek("c00").snapshot()
    memo = PlanMemo()
    memo.plan("op", spec, snap, 0.0, 1)  # a grant of 1 binds: the cut is planned afresh
    memo.plan("op", spec, snap, 0.0)
    assert (memo.planned, memo.reused) == (2, 0)
    with fleet.cluster("c00") as sim:
        assert sim.cordon("c00-z00-r001-h00", "train-c00", "train-c00", limit=128)
    memo.plan("op", spec, fleet.peek("c00").snapshot(), 0.0)
    assert (memo.planned, memo.reused) == (3, 0)


@pytest.mark.parametrize("spec", SPECS, ids=range(len(SPECS)))
@pytest.mark.parametrize("grant", [None, 1, 3, 8, 12, 40])
def test_cli_keeps_its_plan_only_where_no_grant_binds(
    fleet: SqliteFleet, spec: OperationSpec, grant: int | None
) -> None:
    snaps = {"c00": fleet.peek("c00").snapshot()}
    plan = plan_operation(spec, snaps)
    kept = with_grants(plan, spec, {"c00": grant})
    fresh = plan_operation(spec, snaps, grants={"c00": grant})
    if kept is not None:
        assert kept == fresh
    else:
        assert fresh.clusters[0].wave_cap < plan.clusters[0].wave_cap
