"""`trainctl demo` never replaces an existing fleet silently (issue 10, set-up on a fresh machine).

It used to turn a 3,072-host fleet into the 128-host one without a word. Like `fleet init`, it
now refuses with exit 2 naming ``force``, leaves the fleet as it was, and replaces it only when
given ``--force``.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.fleet import SqliteFleet, fleet_path
from tests.train_helpers import make_fleet


def test_demo_refuses_to_replace_a_fleet_without_force(tmp_home):
    path = make_fleet(tmp_home, 3600.0)
    before = path.read_bytes()
    result = CliRunner().invoke(main, ["demo", "--preset", "meta-24k", "--json"])
    assert result.exit_code == 2, result.output
    out = json.loads(result.stdout)
    assert out["field"] == "force" and out["exit_code"] == 2 and "--force" in out["error"]
    assert path.read_bytes() == before  # untouched
    fleet = SqliteFleet(fleet_path())
    try:
        assert fleet.get_meta()["preset"] == "small"
    finally:
        fleet.close()
    human = CliRunner().invoke(main, ["demo"])
    assert human.exit_code == 2 and "Traceback" not in human.output
    assert "--force" in human.output
