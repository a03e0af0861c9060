"""Specs that fit their cluster: a domain larger than the maintenance budget is clamped to it,
live and in the simulator, with the same words; a cycle target out of reach is said; a budget
of no host is refused before anything starts; the shipped examples fit every preset the README
runs them on.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.cli.campaign import _fit_train_block
from orchestrator.app.cli.train_checks import fit_spec_to_cluster
from orchestrator.app.worker import build_worker
from orchestrator.contracts.campaign_spec import load_campaign_spec
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.ops_spec import load_spec as load_operation_spec
from orchestrator.contracts.train_spec import load_train_spec
from orchestrator.fleet.presets import get_preset
from orchestrator.planning.spec_fit import fit_domain, fit_train
from tests.test_hardening_input import offline, refused  # noqa: F401 - the fixture
from tests.test_hardening_train import answer, clean_train, cli
from tests.train_helpers import TARGETS, make_fleet

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
#: Where the README runs its examples: `fleet init --preset` names each of these.
README_PRESETS = ("small", "multi", "meta-24k")
CLAMP = (
    "the 3-host maintenance budget caps the domain at 3 hosts (domain_size 8 asked): any "
    "domain_size of 3 or more runs the same campaign"
)


def test_a_domain_over_the_budget_runs_at_the_budgets_size() -> None:
    """8 hosts asked under a 3-host budget run as 3, with one sentence; a fitting domain, none."""
    fit = fit_domain(8, 3)
    assert (fit.effective, fit.clamped, fit.warning()) == (3, True, CLAMP)
    assert fit_domain(3, 3).warning() is None and fit_domain(1, 1).effective == 1
    budget = CapacityBudget(max_unavailable=5, maintenance=3)
    assert fit_train(8, budget, 128, TARGETS).warnings == [CLAMP]


def test_a_cycle_target_out_of_reach_is_said() -> None:
    """128 hosts, 3 at a time, 1.8 h each take at least 77 h: a 2-day target is out of reach,
    a 4-day one is not; no target, no warning."""
    budget = CapacityBudget(max_unavailable=3)
    (note,) = fit_train(3, budget, 128, TARGETS, cycle_target_hours=48.0).warnings
    assert note.startswith("cycle_target: 2 d cannot be met: 128 hosts, 3 at a time"), note
    assert "3 d 5 h" in note  # 43 rounds of 1 h 48 min
    assert fit_train(3, budget, 128, TARGETS, cycle_target_hours=96.0).warnings == []
    assert fit_train(3, budget, 128, TARGETS).warnings == []


def test_every_example_fits_every_preset_the_readme_runs_it_on() -> None:
    """Each shipped example, through the checks its start command makes, on each preset the
    README initialises: a host under its budget, no clamp, no cycle target out of reach."""
    readme = (REPO / "README.md").read_text()
    assert set(re.findall(r"fleet init --preset ([a-z0-9-]+)", readme)) <= set(README_PRESETS)
    train = load_train_spec(EXAMPLES / "train.yaml")
    cuda = load_operation_spec(EXAMPLES / "cuda.yaml")
    names = ("campaign.yaml", "bad-campaign.yaml", "approved-campaign.yaml")
    campaigns = [load_campaign_spec(EXAMPLES / n) for n in names]
    for name in README_PRESETS:
        preset = get_preset(name)
        hosts = preset.hosts_per_cluster
        train.budget.require_hosts(hosts)
        fitted, warnings = fit_spec_to_cluster(train, hosts)
        assert (warnings, fitted.domain_size) == ([], train.domain_size), name
        cuda.budget.require_hosts(hosts)
        sizes = {f"c{i:02d}": hosts for i in range(preset.clusters)}
        for campaign in campaigns:
            campaign.train.budget.require_hosts(hosts, "train.budget.max_unavailable")
            same, warnings = _fit_train_block(campaign, sizes)
            assert (warnings, same) == ([], campaign), (name, campaign.name)


def test_a_budget_of_no_host_is_refused_before_anything_starts(
    tmp_home: Path,
    offline: None,  # noqa: F811 - the fixture
) -> None:
    """0.5% of 128 hosts is no host: `ops start` and `campaign start` exit 2 naming the budget
    (no server is reachable: nothing got as far as connecting); `max_unavailable: 0` too."""
    make_fleet(tmp_home, 3600.0)
    op = tmp_home / "op.json"
    op.write_text(
        json.dumps(
            {
                "kind": "cuda-upgrade",
                "scope": {"cluster": "c00"},
                "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
                "budget": {"max_unavailable": "0.5%"},
            }
        )
    )
    run = CliRunner().invoke
    args = ["ops", "start", "--spec", str(op), "--json"]
    err = refused(run(main, args), "budget.max_unavailable")
    assert "0.5% of 128 hosts is below one host" in err["error"], err
    campaign = tmp_home / "campaign.json"
    data: dict[str, Any] = {
        "name": "os-tiny",
        "targets": {"os": "6.8.0-50"},
        "stages": [{"name": "all", "clusters": ["c00"]}],
        "train": {"budget": {"max_unavailable": "0.5%"}},
    }
    campaign.write_text(json.dumps(data))
    args = ["campaign", "start", "--spec", str(campaign), "--json"]
    refused(run(main, args), "train.budget.max_unavailable")
    train = tmp_home / "train.json"
    train.write_text(json.dumps({"cluster": "c00", "budget": {"max_unavailable": 0}}))
    args = ["train", "start", "--spec", str(train), "--json"]
    refused(run(main, args), "budget.max_unavailable")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_train_over_its_budget_starts_clamped_with_the_simulators_words(
    dev_env, tmp_home: Path, task_queue: str
) -> None:
    """`train start` of 8 hosts at a time under a 3-host maintenance budget starts the train
    at 3 and says so under `warnings` (and on stderr without --json) in the very words
    `simulate` prints for the same domain and budget; `train reconfigure` clamps the same."""
    path = make_fleet(tmp_home, 36000.0)
    spec_file = tmp_home / "train.json"
    budget = {"max_unavailable": 5, "maintenance": 3}
    spec_file.write_text(json.dumps({"cluster": "c00", "domain_size": 8, "budget": budget}))
    sim = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["simulate", "--preset", "small", "--domain-size", "8", "--budget", "3", "--days", "1"]
        + ["--json"],
    )
    assert json.loads(sim.stdout)["domain_size_note"] == CLAMP, sim.output
    # its own task queue: a worker on the default one would tell other tests' commands that
    # this server serves another fleet
    async with clean_train(dev_env.client), build_worker(dev_env.client, path, task_queue):
        start = ("train", "start", "--spec", str(spec_file), "--task-queue", task_queue)
        st = answer(await cli(dev_env, *start), 0)
        assert st["warnings"] == [CLAMP] and st["domain_size"] == 3, st
        st = answer(
            await cli(dev_env, "train", "reconfigure", "--cluster", "c00", "--domain-size", "6"),
            0,
        )
        assert st["warnings"] == [CLAMP.replace("(domain_size 8", "(domain_size 6")], st
        assert st["domain_size"] == 3, st
        human = await asyncio.to_thread(
            CliRunner().invoke,
            main,
            ["train", "reconfigure", "--cluster", "c00", "--domain-size", "8"]
            + ["--address", str(dev_env.client.service_client.config.target_host)],
        )
        assert human.exit_code == 0 and f"warning: {CLAMP}\n" in human.stderr, human.output
        st = answer(await cli(dev_env, "train", "stop", "--cluster", "c00"), 0)
        handle = dev_env.client.get_workflow_handle("train-c00")
        await asyncio.wait_for(handle.result(), 60)
