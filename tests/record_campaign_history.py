"""Record the Campaign histories that ``tests/test_replay.py`` replays (``campaign.json``,
``campaign_rollback.json``).

Usage: ``python tests/record_campaign_history.py`` (about 40 s). On a private dev server it runs
a short real campaign over a ``multi`` fleet at speed max: a 2-host canary of c00 that bakes one
fleet hour, then the rest of c00, which starts the cluster's train, hands it the rollout, widens
it, moves its targets into the train and stops it. Then, on a fresh fleet whose new kernel is
bad on half of c00's hosts, a canary that fails its gate, is blamed and rolled back. Written
beside the other histories through ``record_histories.write`` (which keeps the entries of files
it does not write).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

ROOT = Path(__file__).resolve().parent.parent
SPEC = {
    "name": "replay",
    "targets": {"os": "6.12.0-9"},
    "stages": [
        {"name": "canary", "clusters": ["c00"], "hosts": 2, "bake": "1h"},
        {"name": "cluster", "clusters": ["c00"]},
    ],
    "gates": {"max_failures": "10%"},
}
BAD = "6.12.0-bad"
ROLLBACK = {
    "name": "half-bad",
    "targets": {"os": BAD},
    "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 8, "bake": "1h"}],
    "gates": {"max_failures": 1},
    "train": {"domain_size": 4},
}


async def main() -> None:
    from orchestrator.app.worker import build_worker
    from orchestrator.campaign.client import campaign_handle, start_campaign
    from orchestrator.contracts.campaign_spec import CampaignSpec
    from orchestrator.contracts.paths import temporal_cli_path
    from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
    from orchestrator.fleet import SqliteFleet
    from orchestrator.fleet.presets import get_preset
    from orchestrator.fleet.settings import MAX_SPEED
    from tests.record_histories import write

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    )
    histories = []
    try:
        for raw, seed, state in ((SPEC, 1, "succeeded"), (ROLLBACK, 3, "rolled_back")):
            with tempfile.TemporaryDirectory() as home:
                path = Path(home) / "fleet.db"
                SqliteFleet.create(path, get_preset("multi"), seed, MAX_SPEED).close()
                if raw is ROLLBACK:
                    fleet = SqliteFleet(path)
                    with fleet.cluster("c00") as sim:
                        sim.inject_fault("os", BAD, 0.5, "recorder")
                    fleet.close()
                spec = CampaignSpec.model_validate(raw)
                async with build_worker(env.client, path, "record"):
                    started = await start_campaign(env.client, spec, task_queue="record", wait=True)
                assert started.status is not None and started.status.state == state, started
                handle = campaign_handle(env.client, spec.workflow_id)
                histories.append(await handle.fetch_history())
    finally:
        await env.shutdown()
    write(histories, ["campaign", "campaign_rollback"])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    asyncio.run(main())
