"""Scopes by Slurm partition, hostlist and feature: refused on the simulated fleet, planned on
plain host views that carry partitions and features (what the Slurm backend hands over).

The simulated fleet has no partitions or node features: ``ops plan`` and ``ops start`` exit 2
naming the field, and the operation's own check refuses it when it is started through the API.
Where host views carry them, the planner scopes by them and names an entry that matches nothing.
The Slurm end-to-end run is ``test_slurm_scope``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.contracts.hostlist import expand_hostlist
from orchestrator.contracts.views import ClusterSnapshot, HostView
from orchestrator.ops import parse_spec_text
from orchestrator.planning.ops_plan import plan_operation
from tests.e2e import op_spec, outcome, run_cli, start_op, worker
from tests.train_helpers import make_fleet

FIELDS: list[tuple[str, Any]] = [
    ("partitions", ["gpu"]),
    ("nodes", "c00-z00-r000-h[00-03]"),
    ("features", ["a100"]),
]


def _spec_file(home: Path, scope: dict[str, Any]) -> Path:
    path = home / "s.json"
    path.write_text(json.dumps(op_spec(scope={"cluster": "c00", **scope})))
    return path


@pytest.mark.parametrize("command", ["plan", "start"])
@pytest.mark.parametrize(("field", "value"), FIELDS)
def test_slurm_scope_fields_exit_2_on_the_simulated_fleet(
    tmp_home: Path, command: str, field: str, value: Any
) -> None:
    make_fleet(tmp_home, 1000.0)
    result = run_cli("ops", command, "--spec", str(_spec_file(tmp_home, {field: value})), "--json")
    assert result.exit_code == 2, result.output
    out = json.loads(result.stdout)
    assert out["field"] == f"scope.{field}", out
    assert "simulated fleet" in out["error"], out


async def test_the_operations_check_refuses_them_through_the_api(
    temporal_env, tmp_home, task_queue
):
    now = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, now)
    async with worker(temporal_env, path, task_queue):
        for field, value in FIELDS:
            spec = op_spec(scope={"cluster": "c00", field: value})
            status = await outcome(await start_op(temporal_env, task_queue, spec))
            assert status.state == "failed", status
            assert f"scope.{field}" in status.reason and "simulated fleet" in status.reason


# ----------------------------------------------------------------- planning on plain views
def _snap(name: str = "s1") -> ClusterSnapshot:
    old = {"gpu_driver": "550.54.15", "cuda": "12.4", "os": "6.8.0"}
    hosts = tuple(
        HostView(
            f"h{i:02d}",
            "r1" if i <= 4 else "r2",
            "z1",
            "in_service",
            versions=old,
            partitions=("gpu", "main") if i <= 3 else ("main",),
            features=("a100", "ib") if i in (6, 7) else ("a100",) if i >= 4 else (),
        )
        for i in range(1, 9)
    )
    return ClusterSnapshot(name, 0.0, len(hosts), hosts, {})


def _scoped(**scope: Any) -> list[str]:
    spec = parse_spec_text(
        json.dumps(op_spec(scope={"cluster": "s1", **scope}, budget={"max_unavailable": 8}))
    )
    plan = plan_operation(spec, {"s1": _snap()})
    return sorted(h for w in plan.waves for h in w.hosts)


def test_planning_scopes_by_partition_hostlist_and_features() -> None:
    assert _scoped(partitions=["gpu"]) == ["h01", "h02", "h03"]
    assert _scoped(partitions=["g*"]) == ["h01", "h02", "h03"]
    assert _scoped(nodes="h[04-05],h08") == ["h04", "h05", "h08"]
    assert _scoped(features=["a100"]) == [f"h{i:02d}" for i in range(4, 9)]
    assert _scoped(features=["a100", "ib"]) == ["h06", "h07"]
    # the fields intersect with each other and with racks
    assert _scoped(partitions=["main"], features=["a100"], racks=["r1"]) == ["h04"]


@pytest.mark.parametrize(
    ("scope", "field"),
    [
        ({"partitions": ["gpu", "cpu"]}, "scope.partitions: 'cpu'"),
        ({"nodes": "h[07-09]"}, "scope.nodes: 'h09'"),
        ({"features": ["a100", "h100"]}, "scope.features: no node in scope carries 'h100'"),
    ],
)
def test_an_entry_matching_nothing_is_named(scope: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[")):
        _scoped(**scope)


@pytest.mark.parametrize("bad", ["h[3-1]", "h[a-b]", "h[01-", "h[0-200000]", ""])
def test_a_bad_hostlist_is_refused_naming_scope_nodes(bad: str) -> None:
    with pytest.raises(ValueError, match="scope.nodes"):
        parse_spec_text(json.dumps(op_spec(scope={"cluster": "c00", "nodes": bad})))


def test_hostlists_expand_like_slurms_and_old_ids_hold() -> None:
    assert expand_hostlist("h[01-03,07],x1") == ["h01", "h02", "h03", "h07", "x1"]
    assert expand_hostlist("gpu[8-10]") == ["gpu8", "gpu9", "gpu10"]
    # a spec without the new fields keeps the id it had before them (computed then)
    spec = {
        "kind": "cuda-upgrade",
        "scope": {"cluster": "c00", "racks": ["r01"]},
        "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
        "budget": {"max_unavailable": "25%"},
    }
    assert parse_spec_text(json.dumps(spec)).operation_id == "ops-c07d1ba5e5f8"
    with_nodes = {**spec, "scope": {**spec["scope"], "nodes": "h[01-02]"}}
    assert parse_spec_text(json.dumps(with_nodes)).operation_id != "ops-c07d1ba5e5f8"
