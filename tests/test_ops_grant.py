"""`ops plan` says what will run: waves at the capacity arbiter's grant (issue 23, #6).

With a train on ``c00`` whose budget is 3 hosts, the cluster's arbiter grants an exclusive
operation 3 hosts at a time, whatever the operation's own budget (25% = 32). ``ops plan`` asks
it (the ``would_grant`` query: nothing is granted) and cuts waves of 3, reporting
``granted_hosts``; with no server answering it plans at the spec's budget, ``granted_hosts:
null``, and says the waves may be smaller. A running operation re-plans ``waves_total`` once,
when its grant differs from what it was planned with, says why, and keeps it from then on.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from orchestrator.contracts.arbiter_types import (
    AcquireRequest,
    ArbiterState,
    HolderEntry,
    arbiter_workflow_id,
)
from orchestrator.contracts.train_types import ControlRequest, TrainInput, TrainStatus
from orchestrator.ops.client import operation_status
from orchestrator.planning.arbiter_share import would_grant
from tests.cli_inproc import cli
from tests.e2e import op_spec, outcome, terminate, worker, write_spec
from tests.train_helpers import make_fleet
from tests.train_helpers import spec as train_spec
from workflows.cluster_train import ClusterTrain


def _entry(holder: str, limit: int, holding: int = 0, granted: int = 0) -> HolderEntry:
    from datetime import UTC, datetime

    return HolderEntry(
        holder=holder,
        workflow_id=holder,
        kind="train",
        exclusive=False,
        want=limit,
        holding=holding,
        granted=granted,
        limit=limit,
        since=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_would_grant_is_the_arbiters_rule() -> None:
    """The smallest limit any holder reads, for an exclusive asker once others hand over."""
    req = AcquireRequest(
        cluster="c00", holder="ops-x", workflow_id="ops-x", want=32, limit=32, exclusive=True
    )
    empty = ArbiterState(cluster="c00")
    assert would_grant(empty, req).granted == 32
    st = ArbiterState(cluster="c00", holders={"train-c00": _entry("train-c00", 3, holding=3)})
    grant = would_grant(st, req)
    assert grant.granted == 3 and grant.waiting_for == ["train-c00"]
    assert "3 hosts as train-c00 reads it" in grant.reason
    shared = req.model_copy(update={"exclusive": False, "holder": "train-c01"})
    st.holders["train-c00"].granted = 2
    assert would_grant(st, shared).granted == 1  # what the other holder leaves


async def test_plan_asks_the_arbiter_and_the_run_keeps_its_plan(dev_env, tmp_home, monkeypatch):
    path = make_fleet(tmp_home, 36000.0)
    address = dev_env.client.service_client.config.target_host
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    queue = f"tq-{uuid.uuid4()}"
    spec_file = write_spec(tmp_home / "op.json", op_spec(budget={"max_unavailable": "25%"}))
    async with worker(dev_env, path, queue):
        train = await dev_env.client.start_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec(domain_size=3, budget={"max_unavailable": 3})),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=queue,
        )
        arbiter = dev_env.client.get_workflow_handle(arbiter_workflow_id("c00", queue))
        try:
            deadline = time.monotonic() + 30
            while True:  # until the train has asked the arbiter
                try:
                    ledger = await arbiter.query("ledger", result_type=ArbiterState)
                    if ledger.holders:
                        break
                except Exception:  # not started yet
                    pass
                assert time.monotonic() < deadline, "the train never asked the arbiter"
                await asyncio.sleep(0.2)

            code, plan, err = await cli(
                "ops", "plan", "--spec", str(spec_file), "--task-queue", queue, "--json"
            )
            assert code == 0, err
            [c00] = plan["clusters"]
            assert c00["granted_hosts"] == 3 and c00["budget_limit"] == 32, c00
            # Waves of 3 hosts in service (a wave may also take the hosts the train holds now,
            # which cost it nothing more: the train hands them over first).
            sizes = [len(w["hosts"]) for w in plan["waves"]]
            assert sizes and sum(s > 3 for s in sizes) <= 3 and max(sizes) <= 6, sizes
            assert (await arbiter.query("ledger", result_type=ArbiterState)).queue == []

            monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # nobody answers there
            code, blind, err = await cli("ops", "plan", "--spec", str(spec_file), "--json")
            monkeypatch.setenv("TEMPORAL_ADDRESS", address)
            assert code == 0, err
            assert blind["clusters"][0]["granted_hosts"] is None
            assert any("may be smaller" in w for w in blind["warnings"]), blind["warnings"]
            assert max(len(w["hosts"]) for w in blind["waves"]) > 3

            code, out, err = await cli(
                "ops", "start", "--spec", str(spec_file), "--task-queue", queue, "--json"
            )
            assert code == 0, err
            op = out["operation_id"]
            seen: list[tuple[int, int, str]] = []
            deadline = time.monotonic() + 90
            while True:
                found = (await operation_status(dev_env.client, op)).clusters.get("c00")
                if found is not None:
                    c = found
                    seen.append((c.waves_done, c.waves_total, c.plan_note))
                    if c.waves_done >= 4:
                        break
                assert time.monotonic() < deadline, seen[-5:]
                await asyncio.sleep(0.3)
            code, aborted, err = await cli("ops", "abort", "--id", op, "--json")
            assert code == 0, err
            handle = dev_env.client.get_workflow_handle(op)
            ended = await asyncio.wait_for(outcome(handle), 60)  # aborted closes Failed
            assert ended.state == "aborted", ended
            await train.execute_update(
                "stop", ControlRequest(reason="test"), result_type=TrainStatus
            )
            await asyncio.wait_for(train.result(), 60)
        finally:
            await terminate(dev_env, train.id)
    done, total, note = seen[-1]
    assert c.granted_hosts == 3 and "grants 3 hosts a wave" in note, seen[-1]
    # Re-planned once, for the grant; from the first wave on, the total never moved.
    after = [t for d, t, n in seen if n]
    assert after and len(set(after)) == 1 and total >= 128 // 3, seen
    code, report, err = await cli("audit", "--json")
    assert code == 0, (report, err)
