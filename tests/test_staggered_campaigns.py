"""Two campaigns staggered on one cluster's train (issue 12's second "Done when").

Real dev server, real SQLite ``multi`` fleet at speed max, the worker in this process, the
campaigns started and watched through the real CLI. A good NIC firmware rolls over c00 first;
once it is on at least half of c00's hosts in service, a BIOS whose build breaks every host it
lands on (an injected fault) starts over c00 too and rides the same train beside it:

- the hosts the train takes while both ride get both (one visit, one install of both);
- the BIOS campaign's stage fails at its first failures; ``blame`` names the BIOS and its
  version at the top, attributed to the BIOS campaign, never the NIC firmware;
- ``on_failure: rollback`` (the default): the BIOS campaign ends ``rolled_back``, no host serves
  on the bad BIOS, and every host that got it is back on its previous BIOS, still on the new
  NIC firmware;
- the NIC campaign is not blamed and goes on to the end; the record's audit is clean.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_handle, final_status
from orchestrator.contracts.train_spec import riding
from orchestrator.contracts.train_types import (
    PlanDomainRequest,
    PlanDomainResult,
    PlanGrantedRequest,
    TrainStatus,
)
from orchestrator.fleet.presets import INITIAL_VERSIONS
from tests.e2e import audit_ok, trainctl
from tests.test_campaign_e2e import (
    hosts,
    multi_fleet,
    no_train_left,  # noqa: F401 (the autouse fixture)
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

OLD_BIOS, OLD_NIC = INITIAL_VERSIONS["bios"], INITIAL_VERSIONS["nic_firmware"]
NIC = "28.41.1000"
BAD_BIOS = "3.3-bad"

NIC_SPEC: dict[str, Any] = {
    "name": "nic-28-41",
    "targets": {"nic_firmware": NIC},
    "stages": [{"name": "c00", "clusters": ["c00"]}],
    # The NIC's stage excuses hosts failing on a version another rollout got marked bad, but
    # between the BIOS's first failures and its mark (the campaigns' next looks) it counts
    # them: room for those few, so the NIC's gate is not at the mercy of who looks first.
    "gates": {"max_failures": "25%"},
    "train": {"domain_size": 4},
}
BIOS_SPEC: dict[str, Any] = {
    "name": "bios-3-3",
    "targets": {"bios": BAD_BIOS},
    "stages": [{"name": "c00", "clusters": ["c00"]}],
    "gates": {"max_failures": 0},  # the first failure fails the stage
}


def events(path: Path, after_seq: int = 0) -> list[tuple[int, str, str, str, dict[str, Any]]]:
    """(seq, actor, kind, host, detail) of the fleet's append-only record after ``after_seq``."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT seq, actor, kind, host, detail FROM events WHERE seq > ? ORDER BY seq",
            (after_seq,),
        ).fetchall()
    finally:
        conn.close()
    return [(s, a, k, h or "", json.loads(d)) for s, a, k, h, d in rows]


def c00_on_nic(path: Path) -> tuple[int, int]:
    """(in-service hosts of c00 on the new NIC firmware, in-service hosts of c00)."""
    serving = [r for r in hosts(path) if r[1] == "c00" and r[2] == "in_service"]
    return sum(1 for r in serving if r[3].get("nic_firmware") == NIC), len(serving)


async def start(home: Path, queue: str, spec: dict[str, Any]) -> None:
    spec_file = home / f"{spec['name']}.json"
    spec_file.write_text(json.dumps(spec))
    code, out, err = await trainctl(
        "campaign", "start", "--spec", str(spec_file), "--json", "--task-queue", queue
    )
    assert code == 0 and "error" not in out, (out, err)


async def status_json(name: str) -> dict[str, Any]:
    code, out, err = await trainctl("campaign", "status", "--id", name, "--json")
    assert "error" not in out, (out, err)
    return out


async def until(what: str, check: Any, tries: int = 900, pause: float = 0.2) -> Any:
    for _ in range(tries):
        got = await check()
        if got:
            return got
        await asyncio.sleep(pause)
    raise AssertionError(f"timed out waiting for {what}")


async def train_history(
    client: Any, task_queue: str, cluster: str = "c00"
) -> tuple[list[tuple[set[str], PlanDomainResult]], list[TrainStatus]]:
    """Every ``plan_domain`` the cluster's train asked, over all its runs, first to last (the
    campaigns whose rollouts it was given, and its result: hosts taken, what they get), and
    the status each live change (``reconfigure``) answered. Read from the train's own
    histories, so "while both rode" is exact, not a guess from timing."""
    # this test's runs only: other tests' trains of the cluster carry the same id
    query = f"WorkflowId = 'train-{cluster}' AND TaskQueue = '{task_queue}'"
    runs = [w async for w in client.list_workflows(query)]
    out: list[tuple[set[str], PlanDomainResult]] = []
    changes: list[TrainStatus] = []
    for run in sorted(runs, key=lambda w: w.start_time):
        handle = client.get_workflow_handle(f"train-{cluster}", run_id=run.run_id)
        asked: dict[int, set[str]] = {}
        updates: set[str] = set()
        for ev in (await handle.fetch_history()).events:
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                request = ev.workflow_execution_update_accepted_event_attributes.accepted_request
                if request.input.name == "reconfigure":
                    updates.add(request.meta.update_id)
            elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
                completed = ev.workflow_execution_update_completed_event_attributes
                if completed.meta.update_id in updates:
                    [st] = await client.data_converter.decode(
                        completed.outcome.success.payloads, [TrainStatus]
                    )
                    changes.append(st)
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = ev.activity_task_scheduled_event_attributes
                name = attrs.activity_type.name
                if name in ("plan_domain", "plan_granted_domain"):  # the latter: issue 27
                    granted = name == "plan_granted_domain"
                    [req] = await client.data_converter.decode(
                        attrs.input.payloads, [PlanGrantedRequest if granted else PlanDomainRequest]
                    )
                    req = req.plan if granted else req
                    asked[ev.event_id] = {r.campaign for r in riding(req.rollout, req.rollouts)}
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                done = ev.activity_task_completed_event_attributes
                if done.scheduled_event_id in asked:
                    [res] = await client.data_converter.decode(
                        done.result.payloads, [PlanDomainResult]
                    )
                    out.append((asked[done.scheduled_event_id], res))
    return out, changes


async def test_nic_then_bad_bios_blames_and_rolls_back_only_the_bios(
    dev_env, tmp_home, task_queue, monkeypatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    path = multi_fleet(tmp_home)
    before = {r[0]: dict(r[3]) for r in hosts(path)}
    assert {v["bios"] for v in before.values()} == {OLD_BIOS}
    assert {v["nic_firmware"] for v in before.values()} == {OLD_NIC}
    fault = ("--cluster", "c00", "--component", "bios", "--version", BAD_BIOS, "--rate", "1.0")
    code, _, err = await trainctl("fleet", "inject-fault", *fault, "--json")
    assert code == 0, err
    client = dev_env.client
    nic_id, bios_id = "campaign-nic-28-41", "campaign-bios-3-3"

    async with build_worker(client, path, task_queue):
        await start(tmp_home, task_queue, NIC_SPEC)

        async def half_on_nic() -> bool:
            on, serving = c00_on_nic(path)
            return serving > 0 and 2 * on >= serving

        await until("half of c00 on the new NIC firmware", half_on_nic)
        await start(tmp_home, task_queue, BIOS_SPEC)

        bios = await asyncio.wait_for(final_status(campaign_handle(client, bios_id)), 180)
        nic = await asyncio.wait_for(final_status(campaign_handle(client, nic_id)), 240)
        bios_json, nic_json = await status_json("bios-3-3"), await status_json("nic-28-41")

    record = events(path)
    got_bad = {
        h for _, _, k, h, d in record if k == "updated" and d["after"].get("bios") == BAD_BIOS
    }
    assert got_bad, "no host got the bad BIOS"
    assert {h.split("-")[0] for h in got_bad} == {"c00"}

    # Hosts visited while both were pending got both: every domain the train planned while
    # both campaigns rode it gets both targets, and its hosts' installs carry the bad BIOS
    # (with the new NIC firmware in the same install where the host still lacked it).
    plans, changes = await train_history(client, task_queue)
    # The BIOS rode beside the NIC firmware (status shows both, in arrival order), and each
    # campaign's end dropped only its own rollout.
    riders = [[r.campaign for r in st.rollouts] for st in changes]
    assert [nic_id, bios_id] in riders, riders
    assert riders[riders.index([nic_id, bios_id]) + 1] == [nic_id], riders
    # Once the BIOS is marked bad its rollout, though still riding until the campaign drops
    # it, gives no new domain anything: the plan says so (held_back), and only gets the NIC.
    while_both = [res for campaigns, res in plans if campaigns == {nic_id, bios_id} and res.hosts]
    with_both = [res for res in while_both if bios_id not in res.held_back]
    assert with_both, "the train took no host while both campaigns rode it"
    for res in while_both:
        if bios_id in res.held_back:
            assert BAD_BIOS in res.held_back[bios_id] and "bios" not in (res.targets or {}), res
    for res in with_both:
        assert res.targets is not None, res
        assert res.targets.get("nic_firmware") == NIC and res.targets.get("bios") == BAD_BIOS, res
    visited = {h for res in with_both for h in res.hosts}
    assert got_bad <= visited, "a host got the bad BIOS outside a plan of both"
    # Each of those hosts ends its visit on both: the new NIC firmware in the same install
    # when it still lacked it, or from its earlier visit (the planner takes idle hosts first,
    # often those the NIC firmware just visited; tests/test_many_rollouts.py has hosts lacking
    # both get both in one visit, deterministically).
    on_nic: set[str] = set()
    bios_visits: set[str] = set()
    for _, actor, kind, host, detail in record:
        if kind != "updated":
            continue
        if detail["after"].get("nic_firmware") == NIC:
            on_nic.add(host)
        if actor == "train-c00" and host in visited and "bios" in detail["after"]:
            assert detail["after"]["bios"] == BAD_BIOS, (host, detail)
            assert host in on_nic, f"{host} got the BIOS without the NIC firmware: {detail}"
            bios_visits.add(host)
    assert bios_visits, "no host visited while both rode was installed"

    # Blame names only the BIOS at the top, the BIOS campaign's; never the NIC firmware's.
    top = bios.blame[0]
    assert (top.component, top.version, top.campaign) == ("bios", BAD_BIOS, "bios-3-3"), bios.blame
    # The NIC firmware may follow far behind (the failing hosts carry it too, as do many
    # passing ones), below the score that marks a version bad: only the BIOS is marked.
    assert all(b.score < 0.5 for b in bios.blame if b.component == "nic_firmware"), bios.blame
    code, listed, err = await trainctl("versions", "list", "--json")
    assert code == 0, err
    marked = [(e["component"], e["version"]) for e in listed["bad_versions"]]
    assert marked == [("bios", BAD_BIOS)], listed
    assert bios_json["blame"][0]["component"] == "bios", bios_json["blame"]
    assert nic.blame == [] and nic_json["blame"] == [], nic.blame

    # The NIC campaign goes on: it ends succeeded, every in-service host of c00 on the new NIC.
    assert nic.state == "succeeded", nic.reason
    rows = {r[0]: r for r in hosts(path)}
    serving = [r for r in rows.values() if r[1] == "c00" and r[2] == "in_service"]
    assert serving and all(r[3]["nic_firmware"] == NIC for r in serving)
    assert all(r[3] == before[r[0]] for r in rows.values() if r[1] != "c00"), "c01-c03 changed"

    # Rollback reverts only the BIOS (on_failure: rollback, the default): every host that got
    # it is back in service on its previous BIOS, keeping the new NIC firmware.
    assert audit_ok(path)
    assert bios.state == "rolled_back", (bios.state, bios.reason)
    assert not [r[0] for r in serving if r[3]["bios"] == BAD_BIOS], "a host serves on the bad BIOS"
    assert all(rows[h][3]["nic_firmware"] == NIC for h in got_bad), "the rollback took the NIC"
    not_back = {
        h: (rows[h][2], rows[h][3]["bios"])
        for h in sorted(got_bad)
        if rows[h][2] != "in_service" or rows[h][3]["bios"] != before[h]["bios"]
    }
    assert not not_back, f"not rolled back ({bios.reason}): {not_back}"
    assert bios.hosts_rolled_back == len(got_bad), bios.reason
