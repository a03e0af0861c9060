"""Growing batches on their failure path, checked from the fleet's record: a lower-layer
operation whose first batch succeeds grows, a failed batch sends the size back to ``start``,
and ``failure_threshold`` failed batches in a row stop it.

A bad build (``fleet inject-fault``, rate 0.5) leaves a host with low bus bandwidth by one named
draw per host, so which hosts fail verification is known before the operation starts; the
scope is two hosts that pass, then hosts that fail. Jobs are evicted as the policy says (no
negotiation, so no wave is handed back empty); installs themselves always succeed and no host
fails by chance, so only the bad build decides. Under a minute (about 15 s here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.sqlite_fleet import SqliteFleet
from orchestrator.ops import parse_spec_text
from tests.e2e import audit_ok, op_spec, outcome, start_op, trainctl, worker
from tests.test_train_windows import _fleet_log

SEED = 5
BIOS = "2.9.1"
RATE = 0.5


@pytest.fixture
def no_chance(monkeypatch: pytest.MonkeyPatch) -> None:
    """No host fails by chance and every install succeeds: only the bad build fails hosts."""
    monkeypatch.setattr(dyn, "next_failure_gap", lambda *a, **k: float("inf"))
    monkeypatch.setattr(
        dyn, "draw_update_outcome", lambda *a, **k: dyn.UpdateOutcome(True, False, None, None)
    )


def _fails(host: str) -> bool:
    """The bad build's draw for ``host``'s first install (``sim_install``)."""
    return dyn.rng(SEED, host, "fault", "bios", 1).random() < RATE


def _idle_fleet(home: Path, wall: object) -> tuple[Path, list[str]]:
    path = home / "fleet.db"
    preset = get_preset("small").model_copy(update={"target_utilisation": 0.0})
    SqliteFleet.create(path, preset, SEED, 1.0, wall=wall).close()  # type: ignore[arg-type]
    fleet = SqliteFleet(path)
    try:
        hosts = list(fleet.peek("c00").order)
    finally:
        fleet.close()
    return path, hosts


def _waves(events: list, owner: str) -> list[tuple[int, int]]:
    """(hosts cordoned, hosts quarantined) per wave of ``owner``, from the record."""
    cordoned: dict[float, list[str]] = {}
    for ev in events:
        ours = ev.detail.get("owner") == owner
        if ev.kind == "host_state" and ev.detail.get("after") == "cordoned" and ours:
            cordoned.setdefault(ev.t, []).append(ev.host)
    bad = {
        ev.host
        for ev in events
        if ev.kind == "host_state" and ev.detail.get("after") == "quarantined"
    }
    return [(len(hs), sum(h in bad for h in hs)) for _, hs in sorted(cordoned.items())]


async def test_failed_batches_reset_the_size_and_stop_the_operation(
    temporal_env: WorkflowEnvironment, tmp_home: Path, task_queue: str, no_chance: None
) -> None:
    """Waves of 2 (both verify), 4 (all fail: back to 2), 2 (all fail: two in a row) and the
    operation stops, naming the failed batches; the hosts left are never touched."""
    path, hosts = _idle_fleet(tmp_home, await temporal_env.get_current_time())
    good = [h for h in hosts if not _fails(h)][:2]
    bad = [h for h in hosts[hosts.index(good[-1]) :] if _fails(h)][:14]
    code, out, err = await trainctl(
        "fleet", "inject-fault", "--cluster", "c00", "--component", "bios",
        "--version", BIOS, "--rate", str(RATE), "--json",
    )  # fmt: skip
    assert code == 0, (out, err)
    spec = op_spec(
        kind="lower-layer",
        scope={"cluster": "c00", "hosts": sorted(good + bad, key=hosts.index)},
        targets={"bios": BIOS},
        budget={"max_unavailable": 24},
        max_failures=1000,
        # Jobs asked first may refuse and have their hosts handed back, leaving a wave empty:
        # evicting as the policy says keeps every wave's hosts in it.
        drain={"max_wait": "2h", "negotiate": False},
        batch={"start": 2, "growth": "exponential", "max": 16, "failure_threshold": 2},
    )
    async with worker(temporal_env, path, task_queue):
        status = await outcome(await start_op(temporal_env, task_queue, spec))
    owner = parse_spec_text(json.dumps(spec)).operation_id
    _, events = _fleet_log(path)
    waves = _waves(events, owner)
    print(f"waves (cordoned, quarantined): {waves}; asked {status.clusters['c00'].batch_sizes}")
    assert status.state == "failed" and "in a row" in status.reason, status.reason
    # Each wave holds whole jobs (``consistency: job``): at least the size asked.
    asked = status.clusters["c00"].batch_sizes
    assert asked == [2, 4, 2], (asked, waves)
    assert len(waves) == 3 and all(n >= a for (n, _), a in zip(waves, asked, strict=True))
    assert waves[0][1] == 0 and all(n == q for n, q in waves[1:]), waves
    audit_ok(path)
