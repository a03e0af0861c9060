"""The six reference runs still give what they gave when recorded (issue 26's yardstick).

``benchmarks/reference_runs.py`` holds the commands and their recorded results; a change that
moves one on purpose re-records them (``--record``) and says so in its commit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "reference_runs.py"


def test_reference_runs_have_not_moved() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
