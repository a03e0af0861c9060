"""The version skew window for bulk operations and campaigns (issue 12, item 4).

Through the real CLI and a real SQLite fleet whose c00 serves three os versions (old, rolling,
newer): with the default window of 3, an operation or a campaign whose target would put a
fourth in service is refused up front at ``ops plan``/``ops start`` and ``campaign
plan``/``campaign start`` (exit 2 naming ``targets.os`` and the versions, nothing started), and
by the campaign's own plan activity (a campaign started through the API); with ``supersedes``
it is accepted. Live, on the dev server and the ``multi`` fleet at speed max: a campaign that
supersedes a train's own target moves that train to the campaign's version when it rides its
whole cluster, leaves a train rolling something else alone, and puts it back when the campaign
is aborted before it finished that cluster.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.campaign_activities import CampaignActivities
from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_handle, final_status
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import PlanRequest
from orchestrator.contracts.train_spec import TrainSpec, riding
from orchestrator.fleet import SqliteFleet
from orchestrator.train.client import start_train, train_status
from tests.e2e import trainctl
from tests.test_campaign_e2e import multi_fleet, no_train_left  # noqa: F401 (autouse)
from tests.test_versions import cli, write
from tests.train_helpers import make_fleet

NEW = "6.12.0-9"
SERVING = ("6.8.0-40", "6.8.0-45", "6.8.0-50")


def three_os_versions(home: Path) -> Path:
    """A fleet whose c00 serves os 6.8.0-40, -45 and -50 (the rest of the fleet only -40)."""
    path = make_fleet(home, 3600.0, preset="multi")
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            names = sorted(sim.hosts)
            for name in names[:10]:
                sim.hosts[name].versions = {**sim.hosts[name].versions, "os": "6.8.0-45"}
            for name in names[10:20]:
                sim.hosts[name].versions = {**sim.hosts[name].versions, "os": "6.8.0-50"}
            sim.dirty_hosts.update(names[:20])
    finally:
        fleet.close()
    return path


def op(**extra: Any) -> dict[str, Any]:
    return {"kind": "lower-layer", "scope": {"cluster": "c0*"}, "targets": {"os": NEW}, **extra}


def campaign(**extra: Any) -> dict[str, Any]:
    return {
        "name": "kernel-6-12",
        "targets": {"os": NEW},
        "stages": [
            {"name": "canary", "clusters": ["c01"], "hosts": 4},
            {"name": "rest", "clusters": "*"},
        ],
        **extra,
    }


def refused_naming_os(code: int, out: dict[str, Any]) -> None:
    assert code == 2 and out["field"] == "targets.os" and out["exit_code"] == 2, out
    for version in (*SERVING, NEW, "skew window of 3", "cluster c00"):
        assert version in out["error"], out


def test_a_fourth_os_version_is_refused_for_operations_and_campaigns(tmp_home: Path) -> None:
    """Every entry point refuses; ``supersedes`` (or a wider ``skew``) lets it through."""
    three_os_versions(tmp_home)
    refused_op = write(tmp_home / "o.json", op())
    refused_campaign = write(tmp_home / "c.json", campaign())
    for args in (
        ("ops", "plan", "--spec", refused_op),
        ("ops", "start", "--spec", refused_op),
        ("campaign", "plan", "--spec", refused_campaign),
        ("campaign", "start", "--spec", refused_campaign),
    ):
        code, out = cli(*args)
        refused_naming_os(code, out)
    # Nothing was started: no server is needed to refuse, and the fleet is as it was.
    fleet = SqliteFleet(tmp_home / "fleet.db")
    try:
        on_new = [h for c in fleet.cluster_names() for h in fleet.peek(c).snapshot().hosts]
        assert not any(h.versions["os"] == NEW for h in on_new)
    finally:
        fleet.close()
    for spec in (op(supersedes={"os": "6.8.0-50"}), op(skew={"os": 4})):
        code, out = cli("ops", "plan", "--spec", write(tmp_home / "ok.json", spec))
        assert code == 0 and out["hosts_to_change"] > 0, out
    # The short form: one lower-layer target, so `supersedes: VERSION` names os.
    for spec in (campaign(supersedes="6.8.0-50"), campaign(supersedes={"os": "6.8.0-45"})):
        code, out = cli("campaign", "plan", "--spec", write(tmp_home / "ok.json", spec))
        assert code == 0 and [s["name"] for s in out["stages"]] == ["canary", "rest"], out
    # A running train's target changes by the same rule (`train reconfigure --supersedes`).
    code, out = cli("train", "reconfigure", "--cluster", "c00", "--target", f"os={NEW}")
    refused_naming_os(code, out)
    code, out = cli("train", "reconfigure", "--cluster", "c00", "--supersedes", "os=6.8.0-50")
    assert code == 2 and out["field"] == "supersedes.os", out
    # A narrower window refuses a target already serving (c00 serves three os versions).
    narrow = campaign(targets={"os": "6.8.0-50"}, skew={"os": 2})
    code, out = cli("campaign", "plan", "--spec", write(tmp_home / "n.json", narrow))
    assert code == 2 and out["field"] == "targets.os" and "skew window of 2" in out["error"], out


def test_the_campaign_plan_activity_refuses_it_too(tmp_home: Path) -> None:
    """A campaign started through the API meets the same check in its plan activity: a
    non-retryable BadSpec naming targets.os, on every cluster its stages cover."""
    path = three_os_versions(tmp_home)
    acts = CampaignActivities(path, client=None, task_queue="unused")  # type: ignore[arg-type]
    env = ActivityEnvironment()
    spec = CampaignSpec.model_validate(campaign())
    with pytest.raises(ApplicationError) as err:
        env.run(acts.plan, PlanRequest(spec=spec))
    assert err.value.type == "BadSpec" and err.value.non_retryable
    assert err.value.message.startswith("targets.os:") and "6.8.0-45" in err.value.message
    ok = CampaignSpec.model_validate(campaign(supersedes="6.8.0-50"))
    assert [p.name for p in env.run(acts.plan, PlanRequest(spec=ok))] == ["canary", "rest"]
    # A campaign that never reaches c00 is not held to c00's window.
    elsewhere = campaign(stages=[{"name": "only", "clusters": ["c01", "c02"]}])
    plans = env.run(acts.plan, PlanRequest(spec=CampaignSpec.model_validate(elsewhere)))
    assert plans[0].clusters == ["c01", "c02"]


def test_campaigns_refuse_bad_versions_and_bad_skew_fields(tmp_home: Path) -> None:
    """A version marked bad fleet-wide is refused by campaign plan/start; a malformed
    ``skew``/``supersedes`` is refused naming the field (exit 2)."""
    make_fleet(tmp_home, 3600.0, preset="multi")
    code, _ = cli("versions", "mark", f"os={NEW}", "--reason", "INC-1: canary failed")
    assert code == 0
    spec = write(tmp_home / "c.json", campaign())
    for verb in ("plan", "start"):
        code, out = cli("campaign", verb, "--spec", spec)
        assert code == 2 and out["field"] == "targets.os" and "marked bad" in out["error"], out
    two = campaign(targets={"os": NEW, "bios": "3.3"}, supersedes="6.8.0-50")
    for doc, what, field in (
        (two, "campaign", "supersedes"),
        (campaign(supersedes={"bios": "3.1"}), "campaign", "supersedes.bios"),
        (campaign(supersedes={"os": NEW}), "campaign", "supersedes.os"),
        (campaign(skew={"cuda": 1}), "campaign", "skew.cuda"),
        (op(skew={"os": 0}), "ops", "skew.os"),
        (
            {
                "kind": "cuda-upgrade",
                "scope": {"cluster": "c00"},
                "targets": {"cuda": "12.6"},
                "supersedes": {"os": "6.8.0-40"},
            },
            "ops",
            "supersedes",
        ),
    ):
        code, out = cli(what, "plan", "--spec", write(tmp_home / "bad.json", doc))
        assert code == 2 and out["field"] == field, (doc, out)
        assert "\n" not in out["error"], out


def test_an_operation_id_is_unchanged_without_skew_fields() -> None:
    """Specs from before the skew window keep their ids (a resubmitted request is one
    operation); a spec that supersedes something is another request."""
    from orchestrator.contracts.ops_spec import OperationSpec, operation_id

    plain = OperationSpec.model_validate(op())
    assert "skew" not in json.dumps(plain.model_dump(mode="json", exclude_defaults=True))
    assert operation_id(plain) == "ops-" + _legacy_hash(plain)
    other = OperationSpec.model_validate(op(supersedes={"os": "6.8.0-50"}))
    assert operation_id(other) != operation_id(plain)


def _legacy_hash(spec: Any) -> str:
    import hashlib

    newer = {"skew", "supersedes", "schedule", "soak_hours", "batch", "approval", "rollback_batch"}
    dump = spec.model_dump(mode="json", exclude={"request_id", *newer})
    for name in ("partitions", "nodes", "features"):  # Slurm scope fields, newer still
        if dump["scope"].get(name) is None:
            dump["scope"].pop(name)
    canon = json.dumps(dump, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_superseding_campaign_retargets_the_train_rolling_the_old_version(
    dev_env: Any, tmp_home: Path, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """c00's train rolls os 6.8.0-50, c01's 6.8.0-47; a campaign of 6.12.0-9 that supersedes
    6.8.0-50 rides both clusters whole: c00's train now targets 6.12.0-9 (hosts it has not
    visited get the new kernel, not the superseded one), c01's keeps its own. Aborted before
    it finished c00, the campaign puts c00's train back on 6.8.0-50."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home)
    own = {"c00": "6.8.0-50", "c01": "6.8.0-47"}
    spec = campaign(
        name="supersede",
        supersedes="6.8.0-50",
        stages=[{"name": "both", "clusters": ["c00", "c01"], "parallel": 2, "bake": "5000h"}],
    )
    async with build_worker(dev_env.client, path, task_queue):
        for cluster, version in own.items():
            train = TrainSpec(cluster=cluster, targets={"os": version}, domain_size=2)
            await start_train(dev_env.client, train, task_queue=task_queue)
        code, out, err = await trainctl(
            "campaign", "start", "--spec", write(tmp_home / "c.json", spec),
            "--task-queue", task_queue, "--json",
        )  # fmt: skip
        assert code == 0 and out["campaign_id"] == "campaign-supersede", (out, err)
        ridden = {c: await _ridden(dev_env.client, c) for c in own}
        code, out, err = await trainctl("campaign", "abort", "--id", "supersede", "--json")
        assert code == 0, (out, err)
        final = await asyncio.wait_for(
            final_status(campaign_handle(dev_env.client, "campaign-supersede")), 180
        )
        after = {c: await train_status(dev_env.client, c) for c in own}
        # By hand on a train: c01's own target superseded the same way.
        code, moved, err = await trainctl(
            "train", "reconfigure", "--cluster", "c01", "--target", f"os={NEW}",
            "--supersedes", "os=6.8.0-47", "--json",
        )  # fmt: skip
        assert code == 0 and moved["targets"]["os"] == NEW, (moved, err)
    # The ride and the re-target are one update: seen together, before the campaign ended.
    assert ridden["c00"].targets["os"] == NEW, ridden["c00"]
    assert ridden["c01"].targets["os"] == "6.8.0-47", ridden["c01"]
    for status in ridden.values():
        assert [r.targets for r in riding(status.rollout, status.rollouts)] == [{"os": NEW}]
    # Aborted before it kept its targets on c00: the train goes back to what it was rolling.
    assert final.state == "aborted", final.reason
    assert after["c00"].targets["os"] == "6.8.0-50", after["c00"]
    assert not riding(after["c00"].rollout, after["c00"].rollouts), after["c00"]


async def _ridden(client: Any, cluster: str) -> Any:
    """The cluster's train status once the campaign's rollout rides it (within 120 s)."""
    for _ in range(600):
        status = await train_status(client, cluster)
        if any(r.campaign == "campaign-supersede" for r in riding(status.rollout, status.rollouts)):
            return status
        await asyncio.sleep(0.2)
    raise AssertionError(f"the campaign never rode {cluster}'s train: {status}")


def test_superseding_a_version_nothing_runs_is_refused(tmp_home: Path) -> None:
    """A `supersedes` naming a version no host carries and no train targets (a typo) exits 2
    naming supersedes.os, for operations and campaigns (issue 24, low)."""
    three_os_versions(tmp_home)
    for spec, verb in (
        (op(supersedes={"os": "6.8.0-99"}), ("ops", "plan")),
        (campaign(supersedes={"os": "6.8.0-99"}), ("campaign", "plan")),
    ):
        code, out = cli(*verb, "--spec", write(tmp_home / "typo.json", spec))
        assert code == 2 and out["field"] == "supersedes.os", out
        assert "6.8.0-99" in out["error"]
