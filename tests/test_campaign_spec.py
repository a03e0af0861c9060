"""Campaign specs, plans, gates and rollouts: pure rules, checked directly and fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.campaign.gate import judge_stage, roll_up
from orchestrator.contracts.campaign_spec import CampaignSpec, load_campaign_spec, resolve_count
from orchestrator.contracts.campaign_types import ClusterStage, StagePlanModel, StageStatus
from orchestrator.contracts.specs import SpecError
from orchestrator.contracts.views import HostView
from orchestrator.planning.campaign_plan import plan_campaign
from orchestrator.planning.rollout import RolloutScope, apply_rollout, recorded_targets

ISSUE_YAML = """\
name: kernel-6-12
targets: {os: 6.12.0-9}
scope: {cluster: "*"}
stages:
  - {name: canary, clusters: [c00], hosts: 4, bake: 2h}
  - {name: first-cluster, clusters: [c00], bake: 4h}
  - {name: rest, clusters: "*", parallel: 2}
gates:
  max_failures: "5%"
  prometheus: {url: "http://prom:9090", query: "ALERTS{alertstate='firing'}"}
"""
SIZES = {"c00": 64, "c01": 64, "c02": 64, "c03": 64}


def test_issue_spec_loads_with_versions_as_text(tmp_path: Path) -> None:
    """The issue's YAML loads as written: versions text, durations hours, gates shared."""
    path = tmp_path / "c.yaml"
    path.write_text(ISSUE_YAML.replace("6.12.0-9", "6.10"))
    spec = load_campaign_spec(path)
    assert spec.targets == {"os": "6.10"}
    assert [s.bake_hours for s in spec.stages] == [2.0, 4.0, 0.0]
    assert spec.stages[2].clusters == ["*"] and spec.stages[2].parallel == 2
    assert spec.workflow_id == "campaign-kernel-6-12"


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"stages": [{"name": "a", "clusters": ["c00"], "hosts": 0}]}, "stages.0.hosts"),
        ({"stages": [{"name": "a", "clusters": ["c00"], "bake": "-2h"}]}, "stages.0.bake"),
        ({"gates": {"max_failures": "150%"}}, "gates.max_failures"),
        ({"targets": {"os": ""}}, "targets"),
        ({"stages": [{"name": "a", "clusters": ["c00"], "paralel": 2}]}, "stages.0.paralel"),
    ],
)
def test_bad_specs_name_their_field(tmp_path: Path, edit: dict, field: str) -> None:
    """A bad field is refused with a one-line error naming it."""
    base = {"name": "x", "targets": {"os": "6.12.0-9"}, "stages": [{"name": "a", "clusters": "*"}]}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**base, **edit}))
    with pytest.raises(SpecError) as err:
        load_campaign_spec(path)
    assert (err.value.field or "").startswith(field), err.value


def test_plan_leaves_out_clusters_an_earlier_stage_covered() -> None:
    """`rest: "*"` after the canary and first cluster of c00 means c01-c03; the canary is 4."""
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.12.0-9"},
            "stages": [
                {"name": "canary", "clusters": ["c00"], "hosts": 4},
                {"name": "first-cluster", "clusters": ["c00"]},
                {"name": "rest", "clusters": "*"},
            ],
            "gates": {"max_failures": "5%"},
        }
    )
    canary, first, rest = plan_campaign(spec, SIZES)
    assert canary.partial and canary.hosts_per_cluster == {"c00": 4}
    assert first.clusters == ("c00",) and not first.partial
    assert rest.clusters == ("c01", "c02", "c03") and rest.hosts_total == 192
    with pytest.raises(ValueError, match=r"stages\.0\.clusters"):
        plan_campaign(spec.model_copy(update={"stages": [spec.stages[0]]}), {"d00": 8})


def test_percent_limits_round_up() -> None:
    """5% of a 4-host canary allows one failure; of 192 hosts, ten."""
    assert resolve_count("5%", 4) == 1
    assert resolve_count("5%", 192) == 10
    assert resolve_count("5%", 0) == 0
    assert resolve_count(3, 100) == 3


def _stage(failed: int, changed: int, gates: dict) -> tuple[StagePlanModel, StageStatus]:
    plan = StagePlanModel(
        name="s",
        clusters=["c00"],
        hosts_per_cluster={"c00": 64},
        partial=False,
        bake_hours=1.0,
        parallel=1,
        gates=gates,
    )
    cs = ClusterStage(
        cluster="c00",
        state="rolling",
        changed=changed,
        attempted=changed,
        failed={f"h{i}": "quarantined" for i in range(failed)},
    )
    ss = StageStatus(name="s", state="running", clusters={"c00": cs}, hosts_planned=64)
    roll_up(plan, ss)
    return plan, ss


def test_one_flaky_host_is_a_bad_host_many_are_a_bad_build() -> None:
    """Without max_failures the base-rate rule decides; with it, the count does."""
    assert judge_stage(*_stage(1, 30, {})) is None
    assert "bad build" in (judge_stage(*_stage(12, 30, {})) or "")
    assert judge_stage(*_stage(4, 64, {"max_failures": "5%"})) is None
    assert "over the gate's 4" in (judge_stage(*_stage(5, 64, {"max_failures": "5%"})) or "")


def _host(name: str, os: str, due: bool = True, state: str = "in_service") -> HostView:
    return HostView(name, "r0", "z0", state, due=due, versions={"os": os})


def test_rollout_takes_only_its_hosts_while_they_lack_the_targets() -> None:
    """A canary rollout makes only its pending hosts due; then its hosts are left alone."""
    hosts = [_host("a", "old"), _host("b", "old"), _host("c", "old")]
    canary = RolloutScope.of({"os": "new"}, ["a"], only=False)
    ruled = apply_rollout(hosts, canary)
    assert [h.name for h in ruled.hosts if h.due] == ["a"] and ruled.rollout
    done = [_host("a", "new"), _host("b", "old"), _host("c", "old")]
    ruled = apply_rollout(done, canary)
    assert [h.name for h in ruled.hosts if h.due] == ["b", "c"] and not ruled.rollout
    only = RolloutScope.of({"os": "new"}, ["a"], only=True)
    assert not any(h.due for h in apply_rollout(done, only).hosts)
    assert recorded_targets({"bios": "3"}, canary) == {"bios": "3"}  # a canary stays a canary
    whole = RolloutScope.of({"os": "new"}, None, only=True)
    assert recorded_targets({"bios": "3"}, whole) == {"bios": "3", "os": "new"}


def test_campaign_plan_cli_bad_cluster_exits_2(tmp_home: Path) -> None:
    """`campaign plan` of a spec naming no cluster exits 2 naming the stage's field."""
    from orchestrator.fleet import SqliteFleet, fleet_path
    from orchestrator.fleet.presets import get_preset

    SqliteFleet.create(fleet_path(), get_preset("multi"), 1, 3600.0).close()
    spec = tmp_home / "c.yaml"
    spec.write_text(ISSUE_YAML)
    ok = CliRunner().invoke(main, ["campaign", "plan", "--spec", str(spec), "--json"])
    assert ok.exit_code == 0, ok.output
    plan = json.loads(ok.stdout)
    assert [s["hosts"] for s in plan["stages"]] == [4, 64, 192]
    spec.write_text(ISSUE_YAML.replace("[c00]", "[c99]", 1))
    bad = CliRunner().invoke(main, ["campaign", "plan", "--spec", str(spec), "--json"])
    assert bad.exit_code == 2
    assert json.loads(bad.stdout.splitlines()[0])["field"] == "stages.0.clusters"
