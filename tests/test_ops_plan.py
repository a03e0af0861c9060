"""Bulk-operation planning on `small`: coverage, read-only, budgets, consistency, bad input."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orchestrator.app.cli import main
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import INITIAL_VERSIONS, get_preset
from orchestrator.ops import load_spec, operation_id, parse_spec_text
from orchestrator.planning.ops_plan import plan_operation

CUDA = {"gpu_driver": "560.35.03", "cuda": "12.6"}
SPEC: dict[str, Any] = {
    "kind": "cuda-upgrade",
    "scope": {"cluster": "c0*"},
    "targets": CUDA,
    "budget": {"max_unavailable": "25%"},
}


#: A real-time fleet: nothing happens in it between building it and planning on it.
STILL = 1.0


def make_fleet(home: Path, speed: float = STILL) -> SqliteFleet:
    return SqliteFleet.create(home / "fleet.db", get_preset("small"), 7, speed)


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(json.dumps(spec))
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def plan_json(spec_file: Path) -> dict[str, Any]:
    result = run("ops", "plan", "--spec", str(spec_file), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def wave_hosts(plan: dict[str, Any]) -> list[str]:
    return [h for w in plan["waves"] for h in w["hosts"]]


def test_every_host_of_scope_appears_exactly_once(tmp_home: Path) -> None:
    """Waves, already_done and deferred together cover each host of the scope exactly once."""
    fleet = make_fleet(tmp_home)
    with fleet.cluster("c00") as sim:
        sim.quarantine("c00-z00-r000-h00", "test", "bad gpu")
        idle = [n for n in sim.order if sim.hosts[n].job_id is None and n != "c00-z00-r000-h00"]
        for name in idle[:2]:
            sim.hosts[name].versions = {**sim.hosts[name].versions, **CUDA}
            sim.dirty_hosts.add(name)
        all_hosts = list(sim.order)
    plan = plan_json(write_spec(tmp_home / "spec.json", SPEC))
    listed = wave_hosts(plan) + plan["already_done"] + plan["deferred"]
    assert sorted(listed) == sorted(all_hosts)
    assert len(listed) == len(set(listed)) == plan["hosts_total"] == 128
    assert plan["deferred"] == ["c00-z00-r000-h00"]
    assert sorted(plan["already_done"]) == sorted(idle[:2])
    assert plan["hosts_to_change"] == 126
    assert plan["estimated_duration_hours"] > 0 and plan["refused"] is None


def _tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(db)
    try:
        return {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
            for t in ("meta", "clusters", "hosts", "jobs", "events", "switches")
        }
    finally:
        conn.close()


def test_plan_changes_nothing_in_the_fleet(tmp_home: Path) -> None:
    """`ops plan` on a fleet whose clock runs leaves every table exactly as it was."""
    make_fleet(tmp_home, speed=36_000.0).close()
    before = _tables(tmp_home / "fleet.db")
    plan = plan_json(write_spec(tmp_home / "spec.json", SPEC))
    assert plan["fleet_hours"] > 0  # the peek did advance the cluster, in memory only
    assert _tables(tmp_home / "fleet.db") == before


def test_waves_respect_budget_given_hosts_already_out(tmp_home: Path) -> None:
    """No wave takes more than the budget minus hosts already out, in the cluster and per rack."""
    fleet = make_fleet(tmp_home)
    held = ["c00-z00-r000-h00", "c00-z00-r001-h00", "c00-z01-r002-h00"]
    with fleet.cluster("c00") as sim:
        for name in held:
            assert sim.cordon(name, "train-c00", "train-c00", limit=128)
        sim.quarantine("c00-z01-r007-h07", "test", "xid errors")
    spec = {**SPEC, "budget": {"max_unavailable": 12, "per_rack": 3}}
    plan = plan_json(write_spec(tmp_home / "spec.json", spec))
    down = Counter(name.rsplit("-", 1)[0] for name in [*held, "c00-z01-r007-h07"])
    assert plan["clusters"][0]["out_of_service"] == 4
    assert plan["clusters"][0]["wave_cap"] == 12 - 4
    assert plan["deferred"] == ["c00-z01-r007-h07"]
    for wave in plan["waves"]:
        taken = [h for h in wave["hosts"] if h not in held]  # held ones are counted in down
        assert len(taken) <= 12 - 4
        per_rack = Counter(h.rsplit("-", 1)[0] for h in taken)
        assert all(down[rack] + n <= 3 for rack, n in per_rack.items())
    assert sorted(wave_hosts(plan)) == sorted(set(wave_hosts(plan)))
    assert plan["conflicts"] == ["c00: serialised after train-c00 which holds 3 hosts"]


def test_running_job_that_fits_a_wave_lands_in_one_wave(tmp_home: Path) -> None:
    """Every running job no larger than a wave has all its hosts in one single wave."""
    fleet = make_fleet(tmp_home)
    snap = fleet.peek("c00").snapshot()
    spec = parse_spec_text(json.dumps({**SPEC, "budget": {"max_unavailable": "60%"}}))
    plan = plan_operation(spec, {"c00": snap})
    cap = plan.clusters[0].wave_cap
    wave_of = {h: w.index for w in plan.waves for h in w.hosts}
    fitting = [j for j in snap.jobs.values() if j.size <= cap]
    assert fitting, "the small fleet should run jobs that fit in a wave"
    for job in fitting:
        assert len({wave_of[h] for h in job.hosts}) == 1, f"job {job.id} split across waves"
        assert job.id in plan.waves[wave_of[job.hosts[0]]].jobs_affected
    assert all(len(w.hosts) <= cap for w in plan.waves)


def test_consistency_cluster_without_window_is_refused(tmp_home: Path) -> None:
    """`consistency: cluster` with no window exits 2 and says which window budget it needs."""
    make_fleet(tmp_home).close()
    spec_file = write_spec(tmp_home / "spec.json", {**SPEC, "consistency": "cluster"})
    result = run("ops", "plan", "--spec", str(spec_file))
    assert result.exit_code == 2
    assert "consistency: cluster needs a window budget of 100% (128 hosts)" in result.output
    assert 'add window: {max_unavailable: "100%"' in result.output
    as_json = run("ops", "plan", "--spec", str(spec_file), "--json")
    assert as_json.exit_code == 2
    plan = json.loads(as_json.stdout)
    assert plan["refused"] and plan["waves"] == []


def test_consistency_cluster_with_full_window_is_one_wave_per_cluster(tmp_home: Path) -> None:
    """With a 100% window every host to change of the cluster is in one single wave."""
    make_fleet(tmp_home).close()
    spec = {
        **SPEC,
        "consistency": "cluster",
        "window": {"max_unavailable": "100%", "duration": "12h"},
    }
    plan = plan_json(write_spec(tmp_home / "spec.json", spec))
    assert plan["refused"] is None
    assert [(w["cluster"], w["index"]) for w in plan["waves"]] == [("c00", 0)]
    assert len(plan["waves"][0]["hosts"]) == plan["hosts_to_change"] - len(plan["deferred"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scope": {"cluster": "x*"}}, "scope.cluster"),
        ({"scope": {"cluster": "c00", "zones": ["z99"]}}, "scope.zones"),
        ({"targets": {"gpu_drvr": "1"}}, "gpu_drvr: unknown component"),
        ({"targets": {"cuda": ""}}, "cuda: version must not be empty"),
        ({"targets": {"cuda": "a b"}}, "cuda: malformed version"),
        ({"kind": "lower-layer", "targets": {"cuda": "12.6"}}, "targets.cuda:"),
        ({"targets": {"os": "6.9"}}, "targets.os:"),
        ({"request_id": "a/b"}, "request_id"),
        ({"drain": {"max_wait": "soon"}}, "drain.max_wait"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_invalid_specs_exit_2_naming_the_field(
    tmp_home: Path, change: dict[str, Any], field: str
) -> None:
    """A bad spec exits 2 with a message that names the offending field or component."""
    make_fleet(tmp_home).close()
    result = run("ops", "plan", "--spec", str(write_spec(tmp_home / "s.json", {**SPEC, **change})))
    assert result.exit_code == 2, result.output
    assert field in result.output


def test_malformed_yaml_exits_2_naming_the_spec(tmp_home: Path) -> None:
    """A spec file that is not YAML at all exits 2 and names `spec`."""
    make_fleet(tmp_home).close()
    bad = tmp_home / "bad.yaml"
    bad.write_text("scope: [c00\n")
    result = run("ops", "plan", "--spec", str(bad))
    assert result.exit_code == 2 and "spec:" in result.output


def test_plan_without_fleet_exits_1(tmp_home: Path) -> None:
    """Planning with no fleet initialised fails with exit 1 and says how to create one."""
    result = run("ops", "plan", "--spec", str(write_spec(tmp_home / "spec.json", SPEC)))
    assert result.exit_code == 1 and "fleet init" in result.output


def test_yaml_spec_keeps_version_text_and_ids_are_stable(tmp_path: Path) -> None:
    """YAML versions that look like floats stay text, and operation ids are stable without '/'."""
    path = tmp_path / "op.yaml"
    path.write_text("scope: {cluster: c00}\ntargets: {cuda: 12.10}\ndrain: {max_wait: 90m}\n")
    spec = load_spec(path)
    assert spec.targets == {"cuda": "12.10"} and spec.drain.max_wait_hours == 1.5
    again = parse_spec_text(json.dumps(spec.model_dump(mode="json")))
    assert operation_id(again) == operation_id(spec) and "/" not in operation_id(spec)
    keyed = parse_spec_text(json.dumps({**SPEC, "request_id": "ticket-4711"}))
    assert operation_id(keyed) == "ops-ticket-4711"


def test_schema_is_valid_json_schema_with_targets_and_scope() -> None:
    """`ops schema` prints a valid JSON Schema that accepts the issue's example spec."""
    import jsonschema  # in the test extra: a missing one fails, never skips

    result = run("ops", "schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert {"targets", "scope"} <= set(schema["properties"])
    example = {**SPEC, "consistency": "job", "max_failures": 0, "request_id": "ticket-4711"}
    jsonschema.validate(example, schema)
    assert INITIAL_VERSIONS["cuda"] != CUDA["cuda"]


def test_reboot_covers_every_host_and_oversized_drain_is_refused(tmp_home: Path) -> None:
    """A reboot puts every in-service host in a wave; draining more than the budget is refused."""
    fleet = make_fleet(tmp_home)
    snaps = {"c00": fleet.peek("c00").snapshot()}
    reboot = parse_spec_text('{"kind": "reboot", "scope": {"cluster": "c00"}}')
    plan = plan_operation(reboot, snaps)
    assert plan.refused is None and plan.already_done == []
    assert sorted(wave_hosts(plan.model_dump())) == sorted(h.name for h in snaps["c00"].hosts)
    drain = parse_spec_text('{"kind": "drain-for-repair", "scope": {"cluster": "c00"}}')
    refused = plan_operation(drain, snaps)
    assert refused.waves == [] and refused.refused is not None
    assert "budget.max_unavailable" in refused.refused
