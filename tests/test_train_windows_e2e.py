"""A train with maintenance windows on the real dev server, at a demo speed, seen by the CLI."""

from __future__ import annotations

import time
from typing import Any

from orchestrator.app.worker import build_worker
from orchestrator.train.client import start_train
from tests.test_hardening_train import answer, clean_train, cli
from tests.train_helpers import make_fleet, spec

SPEED = 360.0  # one fleet hour every 10 wall seconds: a 1 h window lasts 10 s


async def test_train_status_shows_working_and_waiting_for_its_window(dev_env, tmp_home, task_queue):
    """Windows of one fleet hour every two: `train status --json` shows the train working in
    its window (hosts in maintenance) and waiting for the next one, with its start."""
    make_fleet(tmp_home, SPEED)
    schedule = {"windows": [{"cron": "0 */2 * * *", "duration": "1h"}]}
    worker = build_worker(dev_env.client, tmp_home / "fleet.db", task_queue)
    async with clean_train(dev_env.client), worker:
        await start_train(dev_env.client, spec(schedule=schedule), task_queue=task_queue)
        working: dict[str, Any] | None = None
        waiting: dict[str, Any] | None = None
        deadline = time.monotonic() + 120
        while working is None or waiting is None:
            assert time.monotonic() < deadline, f"working={working} waiting={waiting}"
            out = answer(await cli(dev_env, "train", "status", "--cluster", "c00"), 0)
            if out["window_state"] == "open" and out["in_maintenance"] > 0:
                working = out
            if out["window_state"] == "waiting" and out["next_window_start"]:
                waiting = out
        assert working["window_closes_at"] and working["state"] == "running"
        assert waiting["state"] == "running" and "window" in waiting["waiting"]
        stopped = answer(await cli(dev_env, "train", "stop", "--cluster", "c00"), 0)
        assert stopped["state"] in ("stopping", "stopped")
