"""Recorded histories replay against the current workflow code, so determinism breaks fail here.

``tests/histories/*.json`` are real runs recorded by ``tests/record_histories.py``; replaying
them re-executes today's workflow code against yesterday's events, and any change in the
commands it issues (an activity added, reordered or renamed, a timer moved) raises a
nondeterminism error. Such a change needs ``workflow.patched`` or a new workflow version, not a
re-recording. ``commands.json`` pins each history's command sequence in readable form, so a
re-recording that changes it shows in review.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from orchestrator.contracts.train_types import DomainInput, DomainResult
from tests.record_histories import command_sequence, workflow_type
from workflows import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"
MANIFEST: dict[str, dict[str, object]] = json.loads((HISTORIES / "commands.json").read_text())
FILES = sorted(p.name for p in HISTORIES.glob("*.json") if p.name != "commands.json")


def load(name: str) -> WorkflowHistory:
    workflow_id = str(MANIFEST[name]["workflow_id"])
    return WorkflowHistory.from_json(workflow_id, (HISTORIES / name).read_text())


def test_every_history_is_pinned():
    """Each recorded history has a commands.json entry and every entry has its history."""
    assert FILES and sorted(MANIFEST) == FILES


def test_every_workflow_has_a_history():
    """Every registered workflow type has at least one recorded history to replay."""
    names = {w.__temporal_workflow_definition.name for w in WORKFLOWS}  # type: ignore[attr-defined]
    recorded = {str(entry["workflow_type"]) for entry in MANIFEST.values()}
    assert names <= recorded, f"record histories of {sorted(names - recorded)}"


@pytest.mark.parametrize("name", FILES)
async def test_history_replays_on_current_code(name):
    """A recorded run replays without a nondeterminism error on today's workflow code."""
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(load(name))
    assert result.replay_failure is None


@pytest.mark.parametrize("name", FILES)
def test_command_sequence_is_pinned(name):
    """The commands a recorded history holds are the ones pinned in commands.json."""
    history = load(name)
    assert workflow_type(history) == MANIFEST[name]["workflow_type"]
    assert command_sequence(history) == MANIFEST[name]["commands"]


@workflow.defn(name="DomainMaintenance", sandboxed=False)
class _SleepsFirst:
    """DomainMaintenance as a careless edit might leave it: a timer before the first activity."""

    @workflow.run
    async def run(self, inp: DomainInput) -> DomainResult:
        await workflow.sleep(1)
        return DomainResult(domain_id=inp.domain_id)


async def test_replay_catches_a_changed_command_sequence():
    """Replaying a DomainMaintenance history on code that issues other commands fails."""
    name = next(n for n in FILES if MANIFEST[n]["workflow_type"] == "DomainMaintenance")
    replayer = Replayer(
        workflows=[_SleepsFirst],
        data_converter=pydantic_data_converter,
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    with pytest.raises(Exception, match="(?i)nondetermin"):
        await replayer.replay_workflow(load(name))
