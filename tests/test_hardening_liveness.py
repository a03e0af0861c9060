"""Issue 24, items 3-5: no destructive command under a running worker, no owner that dies
silently, and a live change held to the rules of a start.

- ``train reconfigure`` accepted what ``train start`` refuses (a switch_firmware target whose
  rack exceeds the maintenance budget) and ``--budget`` dropped the other budget fields;
- ``fleet init --force`` replaced the fleet under a running worker, which kept writing to the
  deleted file;
- a demo stopped by SIGTERM stranded its hosts, and the audit did not see owners that died.
"""

from __future__ import annotations

from orchestrator.train.client import start_train
from orchestrator.worker import build_worker
from tests.test_hardening_train import answer, clean_train, cli
from tests.train_helpers import make_fleet, spec

SPEED = 36000.0


async def test_reconfigure_is_held_to_the_rules_of_start(dev_env, tmp_home, task_queue):
    """A rack of 8 over a maintenance budget of 3: refused (exit 2, naming the field) as
    `train start` refuses it; --budget changes only the floor; the other fields have options."""
    path = make_fleet(tmp_home, SPEED)
    budget = {"max_unavailable": "10%", "maintenance": "3%", "per_rack": 1}
    async with clean_train(dev_env.client), build_worker(dev_env.client, path, task_queue):
        await start_train(dev_env.client, spec(budget=budget), task_queue=task_queue)
        out = answer(
            await cli(
                dev_env,
                "train",
                "reconfigure",
                "--cluster",
                "c00",
                "--target",
                "switch_firmware=2.1.0",
            ),
            2,
        )
        assert out["field"] == "budget.maintenance" and "whole rack" in out["error"], out
        st = answer(await cli(dev_env, "train", "status", "--cluster", "c00"), 0)
        assert "switch_firmware" not in st["targets"], st
        st = answer(
            await cli(dev_env, "train", "reconfigure", "--cluster", "c00", "--budget", "12%"), 0
        )
        assert st["budget"] == {**budget, "max_unavailable": "12%", "per_zone": None}, st
        st = answer(
            await cli(
                dev_env,
                "train",
                "reconfigure",
                "--cluster",
                "c00",
                "--maintenance",
                "5%",
                "--per-rack",
                "2",
                "--per-zone",
                "4",
            ),
            0,
        )
        assert st["budget"] == {
            "max_unavailable": "12%",
            "maintenance": "5%",
            "per_rack": 2,
            "per_zone": 4,
        }, st
        # Still refused with the rack's 8 over the new 5% (6 hosts); a floor of no host too.
        out = answer(
            await cli(
                dev_env,
                "train",
                "reconfigure",
                "--cluster",
                "c00",
                "--target",
                "switch_firmware=2.1.0",
            ),
            2,
        )
        assert out["field"] == "budget.maintenance", out
        out = answer(
            await cli(dev_env, "train", "reconfigure", "--cluster", "c00", "--budget", "0.1%"), 2
        )
        assert out["field"] == "budget.max_unavailable", out
