"""Growing batches: the rule over each batch's outcome, its refusals, and a 128-host lower-layer
operation whose waves go 2, 4, 8, 16, ... up to the budget, checked from the fleet's record."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.cli.train_checks import fit_spec_to_cluster
from orchestrator.app.worker import build_worker
from orchestrator.contracts.batch_policy import BatchPolicy
from orchestrator.contracts.train_spec import load_train_spec
from orchestrator.contracts.train_types import TrainInput, TrainStatus
from orchestrator.execution.batches import judge_batch, next_batch, round_up_to_groups
from orchestrator.fleet.presets import get_preset
from orchestrator.ops import parse_spec_text
from orchestrator.planning.windows import window_state
from tests.e2e import audit_ok, op_spec, outcome, start_op, worker
from tests.test_hardening_input import EXAMPLES, offline, run  # noqa: F401
from tests.test_train_windows import _fleet_log
from tests.train_helpers import make_fleet, spec
from workflows.cluster_train import ClusterTrain

EXP = BatchPolicy(start=2, growth="exponential", max=32, failure_threshold=2, safety_limit=0.8)


def _run(policy: BatchPolicy, outcomes: list[tuple[int, int]], done: float = 0.1) -> list[Any]:
    """Fold (verified, failed) batches in; each batch as large as asked; the verdicts."""
    size, in_row, out = None, 0, []
    for verified, failed in outcomes:
        asked = next_batch(policy, size, budget=12)
        v = judge_batch(policy, asked, verified, failed, in_row, done)
        out.append((asked, v.succeeded, v.stop != ""))
        size, in_row = v.next_size, v.failures_in_row
    return out


def test_batches_grow_on_success_up_to_the_budget_and_reset_after_a_failure() -> None:
    """Exponential: 2, 4, 8, then the budget (12); a failed batch sends it back to 2; two
    failed in a row stop it."""
    ok = [(99, 0)] * 4
    assert [a for a, _, _ in _run(EXP, ok)] == [2, 4, 8, 12]
    runs = _run(EXP, [(2, 0), (4, 0), (4, 4), (2, 0), (1, 1), (1, 1)])
    assert [a for a, _, _ in runs] == [2, 4, 8, 2, 4, 2]
    assert [stop for _, _, stop in runs] == [False] * 5 + [True]
    linear = BatchPolicy(start=2, growth="linear", step=3, max=7)
    assert [a for a, _, _ in _run(linear, [(99, 0)] * 4)] == [2, 5, 7, 7]


def test_past_the_safety_limit_failed_batches_no_longer_stop_it() -> None:
    runs = _run(EXP, [(1, 1), (1, 1), (1, 1)], done=0.9)
    assert not any(stop for _, _, stop in runs)


def test_a_batch_is_rounded_up_to_whole_groups() -> None:
    """A 2-host batch whose first job holds 3 hosts takes the whole job."""
    job = {"a": 1, "b": 1, "c": 1, "d": 2, "e": 2}
    assert round_up_to_groups(list("abcde"), 2, job.__getitem__) == ["a", "b", "c"]
    assert round_up_to_groups(list("abcde"), 4, job.__getitem__) == list("abcde")


@pytest.mark.parametrize(
    ("batch", "field"),
    [({"start": 8, "max": 4}, "batch.start"), ({"success_threshold": 1.5}, "batch")],
)
def test_bad_batches_are_refused_naming_the_field(batch: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        parse_spec_text(json.dumps(op_spec(batch=batch)))
    with pytest.raises(ValidationError):
        BatchPolicy.model_validate(batch)


def test_a_train_spec_with_batch_and_domain_size_is_refused() -> None:
    with pytest.raises(ValidationError, match="batch: give batch or domain_size, not both"):
        spec(domain_size=8, batch={"start": 2, "max": 16})


def _waves_from_record(path: Path, owner: str) -> list[int]:
    """Sizes of the operation's waves, from the record: hosts it cordoned at one instant."""
    _, events = _fleet_log(path)
    sizes: dict[float, int] = {}
    for ev in events:
        if (
            ev.kind == "host_state"
            and ev.detail.get("after") == "cordoned"
            and ev.detail.get("owner") == owner
        ):
            sizes[ev.t] = sizes.get(ev.t, 0) + 1
    return [sizes[t] for t in sorted(sizes)]


async def test_a_lower_layer_operation_grows_its_waves_up_to_the_budget(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str
) -> None:
    """128 hosts, budget 24, batches from 2 doubling: the record shows waves of at least 2, 4,
    8 and 16 hosts (each rounded up to whole jobs), then none above the budget until done."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time())
    spec = op_spec(
        kind="lower-layer",
        targets={"bios": "2.9.1"},
        consistency="job",
        budget={"max_unavailable": 24},
        batch={"start": 2, "growth": "exponential", "max": 64},
    )
    async with worker(temporal_env, path, task_queue):
        status = await outcome(await start_op(temporal_env, task_queue, spec))
    assert status.state == "succeeded", status.reason
    owner = parse_spec_text(json.dumps(spec)).operation_id
    waves = _waves_from_record(path, owner)
    asked = status.clusters["c00"].batch_sizes
    assert asked[:6] == [2, 4, 8, 16, 32, 64] and len(asked) == len(waves), (asked, waves)
    assert len(waves) >= 5 and all(w <= 24 for w in waves), waves
    assert all(w >= asked for w, asked in zip(waves, [2, 4, 8, 16], strict=False)), waves
    assert waves[0] < waves[2] < 24 and sum(waves) >= 100, waves
    audit_ok(path)


def test_the_examples_load_and_plan(tmp_home: Path, offline: None) -> None:  # noqa: F811
    """examples/train-pacific.yaml loads with its Pacific window and soak and fits `small`;
    examples/lower-layer-batches.yaml plans on `small` (`ops plan`)."""
    train = load_train_spec(EXAMPLES / "train-pacific.yaml")
    assert train.soak_hours == 0.5 and train.schedule and train.schedule.time_zone
    fitted, warnings = fit_spec_to_cluster(train, get_preset("small").hosts_per_cluster)
    assert warnings == [] and fitted.domain_size == 8
    winter = window_state(train.schedule, datetime(2026, 1, 15, 9, 30, tzinfo=UTC))
    summer = window_state(train.schedule, datetime(2026, 7, 15, 8, 30, tzinfo=UTC))
    assert winter.open and summer.open  # 01:30 Pacific both
    assert run("fleet", "init", "--preset", "small").exit_code == 0
    spec = str(EXAMPLES / "lower-layer-batches.yaml")
    plan = run("ops", "plan", "--spec", spec, "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["clusters"][0]["hosts_to_change"] > 0


def _held_peaks(path: Path, owner: str) -> list[int]:
    """The most hosts the train held at once between each two of its takes, from the record."""
    _, events = _fleet_log(path)
    held: set[str] = set()
    peaks: list[int] = []
    for ev in events:
        if ev.kind != "host_state" or not ev.host:
            continue
        after = ev.detail.get("after")
        if after == "cordoned" and ev.detail.get("owner") == owner:
            if ev.host not in held:
                held.add(ev.host)
                peaks.append(len(held))
        elif after in ("in_service", "quarantined", "in_repair"):
            held.discard(ev.host)
    return peaks


async def test_a_train_grows_its_domains_while_they_succeed(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str
) -> None:
    """A train with batch {start: 2, max: 16} on `small` holds at most 2 hosts, then 4, then 8
    as its first domains succeed, and never more than 16 (from the record); it ends its cycle."""
    start = await temporal_env.get_current_time()
    path = make_fleet(tmp_home, 1.0, start)
    train_spec = spec(
        domain_size=16,  # the batch's max: any other domain_size beside a batch is refused
        budget={"max_unavailable": 24, "maintenance": 20},
        batch={"start": 2, "growth": "exponential", "max": 16},
        stop_after_cycles=1,
        halt_after_failures=50,
    )
    assert train_spec.domain_size == 16
    async with build_worker(temporal_env.client, path, task_queue):
        status: TrainStatus = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=train_spec),
            id=f"train-c00-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
    assert status.cycles_completed == 1
    peaks = _held_peaks(path, train_spec.workflow_id)
    # Between two drops of what it holds, the most it held: 2, then 4, then 8 as the first
    # domains succeed, and 16 (the batch's max) at most, ever.
    maxima = [p for i, p in enumerate(peaks) if i + 1 == len(peaks) or peaks[i + 1] <= p]
    assert maxima[:3] == [2, 4, 8] and max(peaks) == 16, peaks
    audit_ok(path)
