"""The simulator says what it simulated (issue 25): a sweep on a multi-cluster preset runs every
cluster, a domain the budget caps says so, the sweep table survives a pipe, and the sweep plot
names what was swept and keeps its capacity lines apart.

Small presets and one or two fleet days keep each of these to a second or two.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.figure
import pytest
from click.testing import CliRunner

from orchestrator.app.cli import main

MULTI_CLUSTERS = ["c00", "c01", "c02", "c03"]


def _simulate(*args: str) -> Any:
    res = CliRunner().invoke(main, ["simulate", *args])
    assert res.exit_code == 0, res.output
    return res.output


def _no_wall(o: Any) -> Any:
    """``o`` without wall-clock figures (the only ones that differ between equal runs)."""
    if isinstance(o, dict):
        return {k: _no_wall(v) for k, v in o.items() if "wall" not in k and k != "workers"}
    if isinstance(o, list):
        return [_no_wall(v) for v in o]
    return o


def test_policy_sweep_on_multi_runs_every_cluster_with_totals() -> None:
    """Each setting of a sweep on ``multi`` reports c00..c03 and fleet totals, the very rows a
    plain fleet-wide run of that setting prints (the old sweep ran c00 alone)."""
    sweep = ("--preset", "multi", "--days", "1", "--sweep", "policy=job-aware,rolling-serial")
    out = json.loads(_simulate(*sweep, "--json"))
    assert out["clusters"] == MULTI_CLUSTERS
    assert [r["setting"] for r in out["runs"]] == ["job-aware", "rolling-serial"]
    for run in out["runs"]:
        assert [c["cluster"] for c in run["clusters"]] == MULTI_CLUSTERS
        assert {c["policy"] for c in run["clusters"]} == {run["setting"]}
        assert run["totals"]["clusters"] == 4
        assert run["totals"]["hosts_total"] == 4 * 64
        assert run["totals"]["hosts_visited"] == sum(c["hosts_visited"] for c in run["clusters"])
        plain = json.loads(
            _simulate("--preset", "multi", "--days", "1", "--policy", run["setting"], "--json")
        )
        assert _no_wall(run["clusters"]) == _no_wall(plain["clusters"])
        assert _no_wall(run["totals"]) == _no_wall(plain["totals"])
    text = _simulate(*sweep)
    for name in [*MULTI_CLUSTERS, "fleet"]:
        assert name in text


def test_a_domain_the_budget_caps_says_so() -> None:
    """With 3% of ``small`` (3 hosts), domains of 4, 8 and 16 all run 3 at a time: the JSON gives
    the effective size and a note per run and for the sweep, and the table and text say it."""
    args = ("--preset", "small", "--budget", "3%", "--days", "1")
    out = json.loads(_simulate(*args, "--sweep", "domain-size=2,4,8,16", "--json"))
    assert [r["effective_domain_size"] for r in out["runs"]] == [2, 3, 3, 3]
    assert "domain_size_note" not in out["runs"][0]
    for run in out["runs"][1:]:
        assert "caps the domain at 3 hosts" in run["domain_size_note"]
    assert len(out["notes"]) == 1
    assert out["notes"][0].startswith("domain-size=4,8,16: the 3-host maintenance budget")
    text = _simulate(*args, "--sweep", "domain-size=2,4,8,16")
    assert "domain-size=4,8,16: the 3-host maintenance budget caps the domain at 3 hosts" in text
    one = json.loads(_simulate(*args, "--domain-size", "16", "--json"))
    assert (one["domain_size"], one["effective_domain_size"]) == (16, 3)
    assert "caps the domain at 3 hosts" in one["domain_size_note"]
    assert "capped at 3 by the budget" in _simulate(*args, "--domain-size", "16")
    fit = json.loads(_simulate(*args, "--json"))  # the default domain is the budget's size
    assert fit["effective_domain_size"] == 3 and "domain_size_note" not in fit


def test_sweep_table_is_whole_when_piped() -> None:
    """Not on a terminal (CliRunner, a pipe), rich used to cut the table to 80 columns:
    'rolling-serial' came out as 'rol…' and the headers as 'vis…'."""
    text = _simulate(
        "--preset", "small", "--days", "1", "--sweep", "policy=job-aware,rolling-serial"
    )
    assert "…" not in text
    for word in ("rolling-serial", "job-aware", "visited", "interr.", "lost GPU-h", "wall s"):
        assert word in text
    header = next(line for line in text.splitlines() if "visited" in line)
    assert len(header) > 80


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[matplotlib.figure.Figure]:
    """Every figure the command saves, kept for inspection."""
    saved: list[matplotlib.figure.Figure] = []
    real = matplotlib.figure.Figure.savefig

    def keep(self: matplotlib.figure.Figure, *args: Any, **kwargs: Any) -> None:
        saved.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return saved


def _capacity_lines(fig: matplotlib.figure.Figure) -> list[Any]:
    """The capacity panel's lines of the settings (not the budget and floor lines)."""
    limits = ("maintenance budget", "floor")
    return [ln for ln in fig.axes[0].get_lines() if not str(ln.get_label()).startswith(limits)]


def _legend(fig: matplotlib.figure.Figure) -> list[str]:
    """The capacity panel's legend entries."""
    legend = fig.axes[0].get_legend()
    assert legend is not None
    return [t.get_text() for t in legend.get_texts()]


def test_policy_sweep_plot_names_every_policy(
    tmp_path: Path, figures: list[matplotlib.figure.Figure]
) -> None:
    """The title of a policy sweep named the default policy ('job-aware on small: sweep of
    policy') whatever was swept."""
    png = tmp_path / "p.png"
    _simulate(
        "--preset",
        "small",
        "--days",
        "1",
        "--sweep",
        "policy=rolling-serial,drain-wait",
        "--plot",
        str(png),
    )
    (fig,) = figures
    title = fig.get_suptitle()
    assert "rolling-serial" in title and "drain-wait" in title
    assert "job-aware" not in title
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_sweep_plot_keeps_identical_capacity_lines_apart(
    tmp_path: Path, figures: list[matplotlib.figure.Figure]
) -> None:
    """Capped domains give the same capacity line: each is drawn in its own style and the legend
    says which lines are the same; the budget is a labelled line of its own."""
    _simulate(
        "--preset",
        "small",
        "--budget",
        "3%",
        "--days",
        "1",
        "--sweep",
        "domain-size=4,8,16",
        "--plot",
        str(tmp_path / "d.png"),
    )
    (fig,) = figures
    lines = _capacity_lines(fig)
    assert len(lines) == 3
    assert len({(ln.get_linestyle(), ln.get_linewidth(), ln.get_color()) for ln in lines}) == 3
    assert len({str(ln.get_linestyle()) for ln in lines}) == 3
    legend = _legend(fig)
    assert "domain-size=8 (same as domain-size=4)" in legend
    assert "domain-size=16 (same as domain-size=4)" in legend
    assert any(t.startswith("maintenance budget: 3 hosts") for t in legend)


def test_multi_sweep_plot_sums_the_clusters(
    tmp_path: Path, figures: list[matplotlib.figure.Figure]
) -> None:
    """On ``multi`` the plot shows the fleet: capacity summed over the four clusters against
    their summed budget (4 x 1 host), titled for every cluster."""
    _simulate(
        "--preset",
        "multi",
        "--days",
        "1",
        "--sweep",
        "policy=job-aware,rolling-serial",
        "--plot",
        str(tmp_path / "m.png"),
    )
    (fig,) = figures
    assert "every cluster of multi" in fig.get_suptitle()
    legend = _legend(fig)
    assert "maintenance budget: 4 hosts" in legend


def test_fleet_series_sums_each_clusters_last_value() -> None:
    """Between its own points a cluster holds its last value; before its first it counts 0;
    points at one instant merge into one."""
    from orchestrator.simulator.fleet_sim import fleet_series

    a = SimpleNamespace(series=[(0.0, 1, 1), (2.0, 3, 2)])
    b = SimpleNamespace(series=[(1.0, 2, 0), (2.0, 1, 1), (2.0, 4, 1)])
    assert fleet_series([a, b]) == [(0.0, 1, 1), (1.0, 3, 1), (2.0, 7, 3)]  # type: ignore[list-item]


def test_series_on_multi_sweep_needs_one_cluster() -> None:
    """As for a plain run: --series on a multi-cluster sweep is bad input naming ``cluster``."""
    res = CliRunner().invoke(
        main,
        ["simulate", "--preset", "multi", "--days", "1", "--sweep", "policy=job-aware"]
        + ["--series"],
    )
    assert res.exit_code == 2
    assert "cluster" in res.output and len(res.output.strip().splitlines()) == 1


def test_bad_swept_budget_names_budget() -> None:
    """A swept budget is read as ``--budget`` is: exit 2 naming ``budget`` (it named
    ``max_unavailable``, the model's field)."""
    res = CliRunner().invoke(
        main, ["simulate", "--preset", "multi", "--sweep", "budget=3%,abc", "--json"]
    )
    assert res.exit_code == 2
    assert json.loads(res.stdout)["field"] == "budget"


def test_sweep_with_horizon_ranks_settings_by_goodput_lost() -> None:
    """``--sweep`` takes ``--horizon`` and ranks its settings by maintenance cost, restarts
    included, and a run whose cycle did not end reads ``incomplete``, never ``None``."""
    args = ["--preset", "small", "--sweep", "domain-size=2,8", "--horizon", "2d", "--seed", "3"]
    o = json.loads(_simulate(*args, "--json"))
    lost = {r["setting"]: r["maintenance_cost_gpu_hours"] for r in o["runs"]}
    assert o["ranking"] == sorted(lost, key=lambda v: lost[v]) and set(lost) == {"2", "8"}
    assert o["ranked_by"].startswith("goodput lost to maintenance"), o["ranked_by"]
    assert all(r["cost_parts"]["restart"] > 0 and not r["complete"] for r in o["runs"])
    text = _simulate(*args)
    assert "maintenance cost GPU-h" in text and "restart GPU-h" in text
    assert "ranked by goodput lost to maintenance, least first: domain-size=" in text
    assert "incomplete" in text and "None" not in text
    fleet = json.loads(
        _simulate("--preset", "multi", "--sweep", "domain-size=1,4", "--horizon", "1d", "--json")
    )
    assert sorted(fleet["ranking"]) == ["1", "4"]
    assert all("restart" in r["totals"]["cost_parts"] for r in fleet["runs"])


def test_domain_sizes_the_budget_caps_alike_run_the_same_campaign() -> None:
    """A sweep's note says domain sizes the maintenance budget caps to the same size run the
    same campaign; they do, as a lone live train holds ``min(domain_size, grant)``: the
    simulator's planner held the asked size and a domain of 4 on a 1-host budget cost the jobs
    5.2 GPU-h where one of 1 cost 11.1."""
    args = ["--preset", "multi", "--cluster", "c01", "--sweep", "domain-size=1,4"]
    o = json.loads(_simulate(*args, "--horizon", "1d", "--json"))
    assert any("runs the same campaign" in note for note in o["notes"]), o["notes"]
    asked = ("setting", "domain_size", "domain_size_note")  # what each was asked, and wall
    one, four = ({k: v for k, v in _no_wall(r).items() if k not in asked} for r in o["runs"])
    assert one == four
