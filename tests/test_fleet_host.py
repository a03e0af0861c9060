""" "Why is this host not updated?" (issue 25): `trainctl fleet host NAME` and `--behind`.

On the real dev server with a real worker and a ``multi`` fleet at 60 fleet seconds per wall
second (slow enough that nothing moves on while the test looks): one host waiting on its job
(c00's train running), one outside its train's window (c01's train in a blackout), one whose
target was marked bad after its train started (c02), and one quarantined (c03). Each answer
names the blocker, the covering train and, for the job, the job's next checkpoint; without a
server the fleet's answer stands with ``eta_hours`` null.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.views import JobView
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.planning.host_explain import Coverage, HostFacts, TrainFacts, explain_host
from orchestrator.train.client import control_train, start_train, train_status
from tests.e2e import trainctl
from tests.test_campaign_e2e import no_train_left  # noqa: F401

SPEED = 60.0
OS = "6.8.0-45"


def _train(cluster: str, **extra: Any) -> TrainSpec:
    return TrainSpec.model_validate(
        {
            "cluster": cluster,
            "domain_size": 2,
            "budget": {"max_unavailable": "10%"},
            "targets": {"os": OS},
            **extra,
        }
    )


def _blocked(out: dict[str, Any], component: str = "os") -> dict[str, Any]:
    entry = next(t for t in out["targets"] if t["component"] == component)
    assert entry["blocked_by"] is not None, out
    return entry


async def _host_json(name: str) -> dict[str, Any]:
    code, out, err = await trainctl("fleet", "host", name, "--json")
    assert code == 0, (out, err)
    return out


@pytest.mark.asyncio(loop_scope="session")
async def test_fleet_host_names_each_blocker(dev_env, tmp_home, task_queue, monkeypatch) -> None:
    """Waiting on a job, on a window, on a bad version and in quarantine: each answered."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    client = dev_env.client
    path = tmp_home / "fleet.db"
    fleet = SqliteFleet.create(path, get_preset("multi"), 1, SPEED)
    with fleet.cluster("c03") as b:  # quarantined before its train starts (a bad DIMM)
        sick = b.host_names()[5]
        assert b.cordon(sick, "ops-dimm", "ops-dimm", limit=10)
        b.quarantine(sick, "ops-dimm", "memory errors on DIMM 3")
        b.close_owner("ops-dimm", "ops-dimm")
    fleet.close()
    blackout = {"blackouts": [{"from": "2000-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}]}
    async with build_worker(client, path, task_queue):
        await start_train(client, _train("c00"), task_queue=task_queue)
        await start_train(client, _train("c01", schedule=blackout), task_queue=task_queue)
        await start_train(client, _train("c02", targets={"bios": "3.3"}), task_queue=task_queue)
        await start_train(client, _train("c03"), task_queue=task_queue)
        for cluster in ("c00", "c01", "c02", "c03"):  # each has planned once (targets recorded)
            for _ in range(200):
                st = await train_status(client, cluster)
                if st.hosts_total:
                    break
                await asyncio.sleep(0.1)
        code, out, err = await trainctl(
            "versions", "mark", "bios=3.3", "--reason", "bricks BMCs", "--json"
        )
        assert code == 0, (out, err)

        code, behind, err = await trainctl("fleet", "host", "--behind", "--json")
        assert code == 0, (behind, err)
        kinds = {g["kind"]: g for g in behind["groups"]}
        assert {"job", "window", "bad_version", "quarantine"} <= set(kinds), list(kinds)
        assert behind["behind"] == sum(g["count"] for g in behind["groups"])

        on_job = next(h for h in kinds["job"]["hosts"] if h["cluster"] == "c00")
        out = await _host_json(on_job["host"])
        entry = _blocked(out)
        assert entry["covered_by"] == "train-c00" and entry["want"] == OS
        assert entry["blocked_by"]["kind"] == "job" and out["job"] is not None
        assert f"job {out['job']}" in entry["blocked_by"]["detail"]
        assert entry["blocked_by"]["until_hours"] >= out["fleet_hours"] - 1
        assert out["eta_hours"] is not None and out["trains_asked"]

        windowed = next(h for h in kinds["window"]["hosts"] if h["cluster"] == "c01")
        entry = _blocked(await _host_json(windowed["host"]))
        assert entry["blocked_by"]["kind"] == "window"
        assert "blackout" in entry["blocked_by"]["detail"]

        held = next(h for h in kinds["bad_version"]["hosts"] if h["cluster"] == "c02")
        entry = _blocked(await _host_json(held["host"]), "bios")
        assert entry["blocked_by"]["kind"] == "bad_version"
        assert "versions clear bios=3.3" in entry["blocked_by"]["detail"]

        out = await _host_json(sick)
        entry = _blocked(out)
        assert out["state"] == "quarantined" and entry["blocked_by"]["kind"] == "quarantine"
        assert "DIMM 3" in entry["blocked_by"]["detail"]

        for cluster in ("c00", "c01", "c02", "c03"):
            await control_train(client, cluster, "stop", "test over")
        for cluster in ("c00", "c01", "c02", "c03"):
            for _ in range(300):
                if (await train_status(client, cluster)).state == "stopped":
                    break
                await asyncio.sleep(0.1)
    # No server answering: the fleet's answer, eta unknown, still exit 0.
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    out = await _host_json(sick)
    assert out["eta_hours"] is None and not out["trains_asked"]
    assert _blocked(out)["blocked_by"]["kind"] == "quarantine"
    code, human, _ = await trainctl("fleet", "host", "nope-h00", "--json")
    assert code == 2 and human["field"] == "name"


def test_explain_host_order_of_blockers() -> None:
    """A quarantine explains before a job; an ended owner means nobody will install it."""
    cov = Coverage(recorded={"os": OS}, setters={"os": ("train-c00", 1.0)})
    job = JobView(7, 16, ("h",), 30.0, 12.0, 10.0)
    base = HostFacts("h", "c00", "in_service", "", "", {"os": "6.8.0-40"}, 11.0, job=job)
    (answer,) = explain_host(base, cov)
    assert answer.blocked_by is not None and answer.blocked_by.kind == "job"
    assert answer.blocked_by.until_hours == 12.0
    sick = HostFacts("h", "c00", "quarantined", "", "bad GPU", {"os": "6.8.0-40"}, 11.0, job=job)
    assert explain_host(sick, cov)[0].blocked_by.kind == "quarantine"  # type: ignore[union-attr]
    cov.closed.add("train-c00")
    assert explain_host(base, cov)[0].blocked_by.kind == "no_owner"  # type: ignore[union-attr]
    on = HostFacts("h", "c00", "in_service", "", "", {"os": OS}, 11.0)
    assert explain_host(on, cov)[0].blocked_by is None


def test_a_train_parked_behind_an_exclusive_operation_says_it_waits_for_it() -> None:
    """A train the arbiter parked behind an operation is not "queued ... in its turn": the host
    waits for that operation, named with the command that shows it."""
    from orchestrator.app.cli.fleet_host import _train_line

    cov = Coverage(recorded={"os": OS}, setters={"os": ("train-c00", 1.0)})
    host = HostFacts("h", "c00", "in_service", "", "", {"os": "6.8.0-40"}, 11.0)
    free = {"train-c00": TrainFacts("running", cluster="c00", cycle_end_hours=40.0)}
    assert "in its turn" in explain_host(host, cov, trains=free)[0].blocked_by.detail  # type: ignore[union-attr]
    parked = TrainFacts("running", cluster="c00", waiting="handing over to ops-cuda-c00")
    (answer,) = explain_host(host, cov, trains={"train-c00": parked})
    assert answer.blocked_by is not None and answer.blocked_by.kind == "operation"
    assert "in its turn" not in answer.blocked_by.detail
    assert "train-c00 waits for ops-cuda-c00, an exclusive operation" in answer.blocked_by.detail
    assert "`trainctl ops status --id ops-cuda-c00`" in answer.blocked_by.detail
    assert _train_line(parked) == "running, waiting for ops-cuda-c00 (parked: takes no host)"


def test_fleet_host_needs_a_name_or_behind(tmp_home: Path) -> None:
    from click.testing import CliRunner

    from orchestrator.app.cli import main

    res = CliRunner().invoke(main, ["fleet", "host", "--json"])
    assert res.exit_code == 2 and '"field": "name"' in res.output
