"""A quiet logical clock (issue 27: no timer per wait) never loses a turn.

On a fleet at speed ``max`` a party hears its turn by a ``fleet_clock`` signal, sent by the
activity whose registration gave the turn. If the worker running that activity dies between
giving the turn (committed in the fleet's record) and sending the signal, the party would wait
forever: no timer backs each wait any more. The train watches instead (``ClockParty._watch``):
while a wait of its goes unanswered it asks the clock now and then to tell every acting party
again. Here the turn is given by a party the test plays and its signal is dropped on purpose,
on the real time-skipping server with a real SQLite fleet; the train still completes its
cycle, every host visited or accounted for, and the audit passes.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.worker import build_worker
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.backend import ClockMember
from orchestrator.contracts.train_types import TrainInput
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED
from tests.train_helpers import spec
from workflows.cluster_train import ClusterTrain

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: A party the test plays: it acts when the train starts, so the clock cannot move until it
#: waits, and its wait then gives someone's turn whose signal never goes out.
PHANTOM = ClockMember("phantom", "phantom-wf", "phantom", None, rank=9)


async def _all_waiting(fleet: SqliteFleet) -> list[dict[str, Any]]:
    """The train's parties, once every one of them waits (the phantom alone acting): the train
    alone since its domains run inline (a seat of its party each), with them before."""
    for _ in range(600):
        parties = [p for p in fleet.clock_parties("c00") if p["party"] != PHANTOM.key]
        if parties and all(p["waiting"] for p in parties):
            return parties
        await asyncio.sleep(0.05)
    raise AssertionError(f"the train never waited: {fleet.clock_parties('c00')}")


async def test_a_turn_whose_signal_was_lost_is_told_again(
    temporal_env: Any, tmp_home: Path, task_queue: str
) -> None:
    path = tmp_home / "fleet.db"
    SqliteFleet.create(path, get_preset("small"), 5, MAX_SPEED).close()
    fleet = SqliteFleet(path)
    try:
        assert fleet.clock_wait("c00", PHANTOM, "p1", 0.0).released  # acting from now on
        train_id = f"train-c00-quiet-{uuid.uuid4().hex[:6]}"
        async with build_worker(temporal_env.client, path, task_queue):
            handle = await temporal_env.client.start_workflow(
                ClusterTrain.run,
                TrainInput(spec=spec(stop_after_cycles=1)),
                id=train_id,
                task_queue=task_queue,
            )
            waiting = await _all_waiting(fleet)
            assert any(p["party"] == train_id for p in waiting), waiting
            # The phantom waits far ahead: its registration gives the next turn (a domain's or
            # the train's), committed in the record; the signal that should tell it is dropped.
            turn = fleet.clock_wait("c00", PHANTOM, "p2", 1e6)
            assert turn.others and not turn.released, turn
            lost = turn.others[0]
            assert any(
                p["party"] == lost.party and not p["waiting"] for p in fleet.clock_parties("c00")
            )
            status = await asyncio.wait_for(handle.result(), 600)
        assert status.cycles_completed == 1, status
        assert status.hosts_visited_this_cycle + status.quarantined + status.in_repair == 128
        report = audit(fleet)
        assert report.ok, report.violations[:3]
    finally:
        fleet.close()


async def test_a_turn_carried_by_a_step_waits_when_another_party_comes(
    temporal_env: Any, tmp_home: Path, task_queue: str
) -> None:
    """Alone on its clock, a train's steps carry its turns (no ``advance_clock`` of their own);
    a party that comes mid-cycle waiting for an earlier instant gets its turn first: the step
    carrying the train's turn does nothing (``ClockTurnPending``) and runs again once the turn
    is given (here the phantom never acts: the train's watch finds it gone). The cycle still
    completes with every host visited or accounted for, and the audit passes."""
    path = tmp_home / "fleet.db"
    SqliteFleet.create(path, get_preset("small"), 5, MAX_SPEED).close()
    fleet = SqliteFleet(path)
    try:
        train_id = f"train-c00-carry-{uuid.uuid4().hex[:6]}"
        async with build_worker(temporal_env.client, path, task_queue):
            handle = await temporal_env.client.start_workflow(
                ClusterTrain.run,
                TrainInput(spec=spec(stop_after_cycles=1)),
                id=train_id,
                task_queue=task_queue,
            )
            for _ in range(600):  # a few fleet hours in: the train acts alone, turns carried
                if fleet.fleet_time(cluster="c00") > 2.0:
                    break
                await asyncio.sleep(0.02)
            now = fleet.fleet_time(cluster="c00")
            # The phantom comes, waiting for this very instant: first in line. It never acts
            # (nobody plays it): the train's watch finds its workflow gone and drops it.
            fleet.clock_wait("c00", PHANTOM, "p1", now)
            status = await asyncio.wait_for(handle.result(), 600)
            pending = [
                e
                async for e in handle.fetch_history_events()
                if e.HasField("activity_task_failed_event_attributes")
                and "ClockTurnPending" in str(e.activity_task_failed_event_attributes.failure)
            ]
        assert pending, "no step carried a turn that another party's came before"
        assert status.cycles_completed == 1, status
        assert status.hosts_visited_this_cycle + status.quarantined + status.in_repair == 128
        report = audit(fleet)
        assert report.ok, report.violations[:3]
    finally:
        fleet.close()
