"""The live ledger: what a train's cycle cost the jobs, read from the fleet's durable record by
the simulator's cost code, through ``trainctl report`` and the Prometheus counter."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.cli.report import cost_line, cost_of
from orchestrator.app.worker import build_worker
from orchestrator.contracts.train_types import TrainInput
from orchestrator.contracts.ui_text import cost_item
from orchestrator.fleet import SqliteFleet
from orchestrator.planning.cost import PARTS
from orchestrator.telemetry.cost_metrics import METRIC, CostCollector
from tests.train_helpers import make_fleet, spec
from workflows.cluster_train import ClusterTrain


def _report(*args: str, code: int = 0) -> Any:
    res = CliRunner().invoke(main, ["report", *args, "--json"])
    assert res.exit_code == code, res.output
    return json.loads(res.stdout)


def _lost_in_record(path: Path) -> tuple[float, int]:
    """An independent count: the work every maintenance stop in the record lost, and the stops."""
    fleet = SqliteFleet(path, read_only=True)
    try:
        stops = [
            e.detail
            for _, e, _ in fleet.events()
            if e.kind == "job_interrupted"
            and str(e.detail.get("cause", "")).startswith("maintenance:")
        ]
    finally:
        fleet.close()
    return sum(float(d["lost_gpu_hours"]) for d in stops), len(stops)


async def test_report_after_a_cycle_counts_the_work_each_stop_lost(
    temporal_env: Any, tmp_home: Path, task_queue: str
) -> None:
    """A rolling-serial cycle of ``small`` evicts jobs; ``trainctl report --since 7d`` lists the
    train's cost by part, its lost work is the sum over the record's interruptions, its parts
    add up, and the Prometheus counter says the same; a bad ``--since`` exits 2 naming it."""
    path = make_fleet(tmp_home, 1.0, await temporal_env.get_current_time(), seed=5)
    train_id = f"train-c00-ledger-{uuid.uuid4().hex[:6]}"
    async with build_worker(temporal_env.client, path, task_queue):
        status = await temporal_env.client.execute_workflow(
            ClusterTrain.run,
            TrainInput(spec=spec(stop_after_cycles=1, policy="rolling-serial")),
            id=train_id,
            task_queue=task_queue,
        )
    assert status.cycles_completed == 1
    # the train's own figures (its page shows them), as its last plan read them from the record
    assert status.cost is not None and status.cost.jobs_stopped > 0
    lost, stops = _lost_in_record(path)
    assert 0 < status.cost.parts["lost_work"] <= lost + 0.01
    assert "ETTR points lost" in cost_item(status.cost)[0]
    assert stops > 0 and lost > 0

    out = _report("--since", "7d")
    assert [r["owner"] for r in out["owners"]] == ["train-c00"]  # the train's owner name
    row = out["owners"][0]
    assert row["owner_kind"] == "train" and row["cluster"] == "c00"
    assert out["parts"]["lost_work"] == pytest.approx(lost, abs=0.01)
    assert out["parts"]["restart"] > 0 and out["parts"]["held_idle"] > 0
    assert out["total_gpu_hours"] == pytest.approx(sum(out["parts"][p] for p in PARTS), abs=0.01)
    assert _report("--since", "7d", "--cluster", "c00")["owners"] == out["owners"]

    exported = {
        s.labels["part"]: s.value
        for family in CostCollector(path).collect()
        for s in family.samples
        if s.name == f"{METRIC}_total" and s.labels["owner_kind"] == "train"
    }
    assert exported["lost_work"] == pytest.approx(lost, abs=0.01)
    assert set(exported) == set(PARTS)

    # What ``train status`` shows: the same parts, and the ETTR points the stopped jobs lost.
    cost = cost_of(["train-c00"])
    assert cost is not None
    assert cost["parts"] == {p: pytest.approx(row[p], abs=0.01) for p in PARTS}
    assert cost["jobs_stopped"] > 0
    assert 0 < cost["ettr_points_lost"] < 100
    assert "ETTR points" in cost_line(cost)

    assert _report("--since", "-3d", code=2)["field"] == "since"
    assert _report("--since", "soon", code=2)["field"] == "since"
    assert _report("--cluster", "c99", code=2)["field"] == "cluster"
