"""An operation runs the waves planned when it began; it re-plans only with a reason it says.

``follow_planned`` keeps the planned waves on the hosts still to change: hosts gone (failed, in
repair, changed meanwhile) drop out, hosts outside every remaining wave (handed back by a
refusing job, back from repair) join the last wave or one more, and hosts beyond the room a wave
has now go the same way. ``take_wave`` with the planned waves cordons the first one still
holding hosts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.execution.ops_take import PlanMemo, cluster_view, plan_one, planned_hosts
from orchestrator.execution.ops_take import take_wave as take
from orchestrator.execution.wave_pacing import follow_planned
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from orchestrator.ops import parse_spec_text

PLANNED = [["a", "b"], ["c", "d"], ["e"]]
SPEC = {
    "kind": "cuda-upgrade",
    "scope": {"cluster": "c00"},
    "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
    "budget": {"max_unavailable": "25%"},
}


def test_unchanged_hosts_keep_the_planned_waves():
    out = follow_planned(PLANNED, ["a", "b", "c", "d", "e"], 2)
    assert (out.waves, out.index, out.why) == (PLANNED, [0, 1, 2], "")


def test_a_wave_with_no_host_left_drops_out_and_says_so():
    out = follow_planned(PLANNED, ["a", "e"], 2)
    assert out.waves == [["a"], ["e"]] and out.index == [0, 2]
    assert out.why == "1 planned wave had no host left to change"


def test_hosts_outside_the_waves_join_the_last_with_room_else_one_more():
    joined = follow_planned(PLANNED[1:], ["c", "d", "e", "a"], 2)  # "a" handed back by wave 1
    assert joined.waves == [["c", "d"], ["e", "a"]] and joined.index == [0, 1]
    assert joined.why == "1 host to change outside the planned waves"
    more = follow_planned(PLANNED[1:], ["c", "d", "e", "a", "b"], 2)
    assert more.waves == [["c", "d"], ["e"], ["a", "b"]] and more.index == [0, 1, 2]


def test_hosts_beyond_the_room_move_to_the_last_wave_or_one_more():
    out = follow_planned([["a", "b"], ["c"]], ["a", "b", "c"], 2)  # room for 2: unchanged
    assert out.waves == [["a", "b"], ["c"]] and out.why == ""
    out = follow_planned(PLANNED, ["a", "b", "c", "d", "e"], 1)
    assert out.waves == [["a"], ["c"], ["e"], ["b"], ["d"]] and out.index == [0, 1, 2, 3, 3]
    assert out.why == "room ran out: room for 1 host a wave, 2 hosts moved on"
    out = follow_planned([["a", "b", "c"], ["d"]], ["a", "b", "c", "d"], 2)
    assert out.waves == [["a", "b"], ["d", "c"]] and out.index == [0, 1]


@pytest.fixture
def fleet(tmp_home: Path) -> SqliteFleet:
    return SqliteFleet.create(tmp_home / "fleet.db", get_preset("small"), 3, MAX_SPEED)


def test_take_wave_cordons_the_planned_waves_in_order(fleet: SqliteFleet) -> None:
    spec = parse_spec_text(json.dumps(SPEC))
    with fleet.cluster("c00") as b:  # one fleet hour throughout
        plan = plan_one(spec, b.snapshot())
        assert plan is not None and len(plan.waves) >= 3
        planned, memo = planned_hosts(plan), PlanMemo()
        view = cluster_view(b, memo, "op", spec, None, None, [])
        assert (view.planned, view.waves_left, view.replan) == (planned, len(planned), "")
        # Had the first wave run and handed its hosts back, they would be outside the rest.
        rest = cluster_view(b, memo, "op", spec, None, None, planned[1:])
        assert rest.waves_left == len(planned) and rest.planned is not None
        assert rest.planned[: len(planned) - 1] == planned[1:] and rest.planned[-1] == planned[0]
        assert rest.replan == f"{len(planned[0])} hosts to change outside the planned waves"
        first = take(b, fleet, memo, "op", spec, view.limit, None, planned=planned)
    assert sorted(first.hosts) == sorted(planned[0]) and first.planned_done == 1


def test_a_smaller_grant_than_the_planned_waves_plans_afresh_at_the_grant(
    fleet: SqliteFleet,
) -> None:
    spec = parse_spec_text(json.dumps(SPEC))
    with fleet.cluster("c00") as b:
        planned = planned_hosts(plan_one(spec, b.snapshot()) or pytest.fail("no plan"))
        at_two = plan_one(spec, b.snapshot(), None, 2)
        view = cluster_view(b, PlanMemo(), "op", spec, None, 2, planned)
    assert at_two is not None and max(map(len, planned)) > 2
    assert view.planned == planned_hosts(at_two) and view.waves_left == len(at_two.waves)
