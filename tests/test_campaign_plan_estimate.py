"""`campaign plan` estimates each stage's cost on `multi`: a driver/CUDA stage's operations as
`ops plan` plans the same specs, a train stage by the `simulate` command it names. No server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset

CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}
BUDGET = {"max_unavailable": "10%"}


def campaign(targets: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "est",
        "targets": targets,
        "scope": {"cluster": "c*"},
        "stages": [
            {"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"},
            {"name": "first-cluster", "clusters": ["c00"], "bake": "4h"},
            {"name": "rest", "clusters": "c*", "parallel": 2},
        ],
        "train": {"domain_size": 6, "budget": BUDGET},
    }


def run_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def in_range(r: list[float]) -> None:
    low, high = r
    assert 0 <= low <= high <= 2 * low + 2, r


def test_stage_estimates_are_the_ops_plan_of_the_stage_operations(tmp_home: Path) -> None:
    """Every stage of a CUDA campaign has its ranges (high at most 2 x low + 2); a cluster's
    operation figures are those `ops plan` gives for the spec the run starts there; the stage
    after the canary counts the canary's hosts as changed; a train stage names `simulate`."""
    # A fleet all but stopped (a wall minute is 0.06 fleet seconds): both plans see one moment.
    SqliteFleet.create(tmp_home / "fleet.db", get_preset("multi"), 1, 0.001).close()
    spec = tmp_home / "c.json"
    spec.write_text(json.dumps(campaign(CUDA)))
    plan = run_json("campaign", "plan", "--spec", str(spec))
    stages = {s["name"]: s for s in plan["stages"]}
    for s in plan["stages"]:
        est = s["estimate"]
        assert est["runs_as"] == "operation" and est["train_estimate"] is None
        assert [o["cluster"] for o in est["operations"]] == s["clusters"]
        for key in ("jobs_interrupted_range", "gpu_hours_lost_range"):
            in_range(est[key])
        in_range(est["estimated_duration_range_hours"])
        assert est["estimated_duration_range_hours"][0] >= s["bake_hours"]
        assert all(o["refused"] is None and o["waves"] >= 1 for o in est["operations"])
    assert stages["canary"]["estimate"]["operations"][0]["hosts_to_change"] == 4
    assert stages["first-cluster"]["estimate"]["operations"][0]["hosts_to_change"] == 60
    assert stages["rest"]["estimate"]["jobs_interrupted_range"][1] > 0

    canary = stages["canary"]["estimate"]["operations"][0]
    assert (
        len(canary["hosts"]) == 4 and stages["rest"]["estimate"]["operations"][0]["hosts"] is None
    )
    # The stages no earlier stage touched: the canary (its hosts) and the rest.
    for stage, op in [("canary", canary)] + [
        ("rest", o) for o in stages["rest"]["estimate"]["operations"]
    ]:
        c = op["cluster"]
        scope: dict[str, Any] = {"cluster": c}
        if op["hosts"] is not None:
            scope["hosts"] = op["hosts"]
        op_spec = tmp_home / f"op-{stage}-{c}.json"
        op_spec.write_text(
            json.dumps(
                {
                    "kind": "cuda-upgrade",
                    "scope": scope,
                    "targets": CUDA,
                    "request_id": f"est-{stage}-{c}",
                    "budget": BUDGET,
                }
            )
        )
        ops = run_json("ops", "plan", "--spec", str(op_spec))
        assert op["operation_id"] == ops["operation_id"]
        assert op["waves"] == len(ops["waves"])
        assert op["hosts_to_change"] == ops["hosts_to_change"]
        assert op["jobs_interrupted_range"] == ops["jobs_interrupted_range"]
        assert op["gpu_hours_lost_range"] == ops["gpu_hours_lost_range"]
        assert op["estimated_duration_range_hours"] == ops["estimated_duration_range_hours"]

    spec.write_text(json.dumps(campaign({"os": "6.8.0-50", **CUDA})))
    mixed = run_json("campaign", "plan", "--spec", str(spec))["stages"][2]["estimate"]
    assert mixed["runs_as"] == "train, then operation" and mixed["operations"]
    assert mixed["train_estimate"].startswith("trainctl simulate --preset multi --cluster c01")
    spec.write_text(json.dumps(campaign({"os": "6.8.0-50"})))
    train = run_json("campaign", "plan", "--spec", str(spec))["stages"][0]["estimate"]
    assert train["runs_as"] == "train" and train["operations"] == []
    assert train["jobs_interrupted_range"] is None and "--domain-size 6" in train["train_estimate"]
