"""The README's path: a campaign riding the train that already runs on ``c00`` (issue 23).

On the real dev server and a real SQLite ``multi`` fleet, the README's own train
(``examples/train.yaml``) runs on ``c00`` when the campaign starts, so the campaign hands its
canary to that train rather than starting one:

- a bad kernel (``examples/bad-campaign.yaml``, the injected fault breaking every host it lands
  on) is caught in the canary: each canary host gets it at most once (a host that failed on it
  is never given it again, even after repair reimaged it), the train's failures-in-a-row rule
  does not halt the train on the campaign's hosts, blame names the kernel, rollback runs, and no
  host in service is left on it;
- a good kernel's canary passes and the audit agrees (no ``stale_return`` for hosts that got the
  campaign's newer kernel on purpose), also when the train that recorded the older target was
  stopped before the campaign started its own;
- a version marked bad by hand fails the campaign riding the train at its next look.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_handle, final_status, start_campaign
from orchestrator.contracts.campaign_spec import CampaignSpec, load_campaign_spec
from orchestrator.contracts.campaign_types import CampaignStatus, ClusterStage
from orchestrator.contracts.train_spec import load_train_spec
from orchestrator.train.client import control_train, start_train, train_status
from tests.e2e import audit_ok, trainctl
from tests.test_campaign_e2e import (
    hosts,
    multi_fleet,
    no_train_left,  # noqa: F401 (the autouse fixture)
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BAD = "6.12.0-bad"
_NONE = ClusterStage(cluster="-")


def _installs(path: Path, component: str, version: str) -> Counter[str]:
    """How many times the record shows each host updated to ``component=version``."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT host, detail FROM events WHERE kind = 'updated'").fetchall()
    finally:
        conn.close()
    return Counter(h for h, d in rows if json.loads(d).get("after", {}).get(component) == version)


def _canary_only(spec: CampaignSpec, name: str, targets: dict[str, str]) -> CampaignSpec:
    """The example campaign cut to its canary (the part that rides the train)."""
    data: dict[str, Any] = spec.model_dump(mode="json", exclude_none=True)
    data.update(name=name, targets=targets, stages=[data["stages"][0]])
    return CampaignSpec.model_validate(data)


async def _readme_train(client: Any, queue: str) -> None:
    """`trainctl train start --spec examples/train.yaml`, running before the campaign."""
    await start_train(client, load_train_spec(EXAMPLES / "train.yaml"), task_queue=queue)
    for _ in range(300):
        if (await train_status(client, "c00")).visits_total >= 1:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the README's train visited no host")


async def test_bad_build_riding_the_readme_train_is_blamed_and_rolled_back(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    """The train runs on c00; the bad campaign ends rolled_back with the kernel blamed, no
    canary host given it twice, the train not halted, nothing in service on it."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    client = dev_env.client
    path = multi_fleet(tmp_home)
    fault = ("--cluster", "c00", "--component", "os", "--version", BAD, "--rate", "1.0")
    code, _, err = await trainctl("fleet", "inject-fault", *fault, "--json")
    assert code == 0, err
    spec = load_campaign_spec(EXAMPLES / "bad-campaign.yaml")
    async with build_worker(client, path, task_queue):
        await _readme_train(client, task_queue)
        await start_campaign(client, spec, task_queue=task_queue)
        status = await asyncio.wait_for(
            final_status(campaign_handle(client, spec.workflow_id)), 240
        )
        train = await train_status(client, "c00")
        await control_train(client, "c00", "stop", "test over")
    assert status.state == "rolled_back", status.reason
    assert status.stages[0].state == "failed" and status.stage == "canary"
    top = status.blame[0]
    assert (top.component, top.version) == ("os", BAD), status.blame
    # The canary rode the running train (it started none) and the train kept its own cycle.
    canary = status.stages[0].clusters["c00"]
    assert not canary.started_train
    assert train.state == "running", train.reason
    assert len(set(canary.hosts or [])) == 4
    installs = _installs(path, "os", BAD)
    assert installs and max(installs.values()) == 1, installs  # nobody got it twice
    assert set(installs) <= set(canary.hosts or [])
    assert not [r[0] for r in hosts(path) if r[2] == "in_service" and r[3]["os"] == BAD]
    code, listed, err = await trainctl("versions", "list", "--json")
    assert code == 0 and ("os", BAD) in {
        (e["component"], e["version"]) for e in listed["bad_versions"]
    }, (listed, err)
    assert audit_ok(path)


async def test_good_canary_riding_the_readme_train_passes_the_audit(
    dev_env, tmp_home, task_queue
) -> None:
    """The example campaign's canary, newer than the train's kernel, passes riding the README's
    train, and the audit holds its four hosts to the campaign's kernel, not the train's."""
    client = dev_env.client
    path = multi_fleet(tmp_home)
    example = load_campaign_spec(EXAMPLES / "campaign.yaml")
    spec = _canary_only(example, "os-canary-riding", dict(example.targets))
    async with build_worker(client, path, task_queue):
        await _readme_train(client, task_queue)
        await start_campaign(client, spec, task_queue=task_queue)
        status = await asyncio.wait_for(
            final_status(campaign_handle(client, spec.workflow_id)), 240
        )
        await control_train(client, "c00", "stop", "test over")
    assert status.state == "succeeded", status.reason
    canary = status.stages[0].clusters["c00"]
    assert not canary.started_train and canary.changed == 4, canary
    on_new = {r[0] for r in hosts(path) if r[3]["os"] == example.targets["os"]}
    assert set(canary.hosts or []) <= on_new
    assert audit_ok(path)


async def test_a_campaign_after_a_stopped_train_passes_the_audit(
    dev_env, tmp_home, task_queue
) -> None:
    """Train started (os 6.8.0-45) and stopped, then a campaign's 4-host canary to a newer
    kernel on a train of its own: the audit does not hold those hosts to the stopped train's
    kernel."""
    client = dev_env.client
    path = multi_fleet(tmp_home)
    example = load_campaign_spec(EXAMPLES / "campaign.yaml")
    spec = _canary_only(example, "os-after-stop", {"os": "6.8.0-60"})
    async with build_worker(client, path, task_queue):
        await _readme_train(client, task_queue)
        await control_train(client, "c00", "stop", "before the campaign")
        for _ in range(300):
            if (await train_status(client, "c00")).state == "stopped":
                break
            await asyncio.sleep(0.1)
        assert audit_ok(path)
        await start_campaign(client, spec, task_queue=task_queue)
        status = await asyncio.wait_for(
            final_status(campaign_handle(client, spec.workflow_id)), 240
        )
    assert status.state == "succeeded", status.reason
    assert status.stages[0].clusters["c00"].started_train
    assert audit_ok(path)


async def test_a_version_marked_bad_by_hand_fails_the_campaign_riding_the_train(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    """`versions mark` of the campaign's kernel while its canary rides the train: the stage
    fails naming the mark, rollback runs, and the train takes no new host with it."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    client = dev_env.client
    path = multi_fleet(tmp_home)
    example = load_campaign_spec(EXAMPLES / "campaign.yaml")
    data = yaml.safe_load((EXAMPLES / "campaign.yaml").read_text())
    data["stages"][0]["bake"] = "200h"  # still baking when the operator marks it
    spec = _canary_only(CampaignSpec.model_validate(data), "os-marked", dict(example.targets))
    async with build_worker(client, path, task_queue):
        await _readme_train(client, task_queue)
        await start_campaign(client, spec, task_queue=task_queue)
        handle = campaign_handle(client, spec.workflow_id)
        for _ in range(600):
            try:
                st = await handle.query("status", result_type=CampaignStatus)
            except Exception:  # noqa: BLE001 - asked before its first task ran
                st = None
            if st is not None and st.stages[0].clusters.get("c00", _NONE).changed >= 1:
                break
            await asyncio.sleep(0.1)
        pair = f"os={example.targets['os']}"
        code, out, err = await trainctl(
            "versions", "mark", pair, "--reason", "kernel panics seen in prod", "--json"
        )
        assert code == 0, (out, err)
        marked_at = len(_installs(path, "os", example.targets["os"]))
        status = await asyncio.wait_for(final_status(handle), 240)
        await control_train(client, "c00", "stop", "test over")
    assert status.state == "rolled_back", status.reason
    assert "marked bad fleet-wide" in status.stages[0].reason
    # Domains in flight when it was marked may finish; none started after the mark.
    assert len(_installs(path, "os", example.targets["os"])) <= marked_at + 1
    assert not [
        r[0] for r in hosts(path) if r[2] == "in_service" and r[3]["os"] == example.targets["os"]
    ]
    assert audit_ok(path)
