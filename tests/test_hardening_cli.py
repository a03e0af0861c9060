"""The CLI's error contract under bad input and a broken environment (issue 10, items 5 and 9).

Every error is one line naming the field, exit 2 for bad input and 1 for a failed operation;
under ``--json`` it is one object on stdout, ``{"error", "field", "exit_code"}``. Never a
traceback. The cases here are the ones found by hand: a speed of 1e308, a directory or binary
garbage as a spec, ``TRAINCTL_HOME`` that is a file, read-only or on a full disk, a truncated or
scribbled fleet database.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orchestrator.app.cli import main
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.sqlite_fleet import FleetUnreadable

REPO = Path(__file__).resolve().parent.parent
ENTRY = "from orchestrator.app.cli import entrypoint; entrypoint()"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def contract(result: Result, code: int, field: str | None) -> dict[str, Any]:
    """``result`` is one JSON error object on stdout with ``code`` and ``field``; return it."""
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    err = json.loads(lines[0])
    assert set(err) >= {"error", "field", "exit_code"}, err
    assert err["exit_code"] == code and err["field"] == field, err
    assert "\n" not in err["error"] and "Traceback" not in result.output
    return err


def human(result: Result, code: int, field: str) -> str:
    """Without --json: one line ``Error: <field>: ...`` on stderr, nothing on stdout."""
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {field}:"), result.stderr
    return lines[0]


def cli(
    *args: str, home: Path, preexec: Callable[[], None] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess (what a user runs), with ``home``."""
    return subprocess.run(
        [*prefix, sys.executable, "-c", ENTRY, *args],
        cwd=REPO,
        env={**os.environ, "TRAINCTL_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=preexec,
    )


def proc_contract(p: subprocess.CompletedProcess[str], code: int, field: str) -> str:
    assert p.returncode == code, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    err = json.loads(p.stdout)
    assert err["exit_code"] == code and err["field"] == field, err
    return str(err["error"])


# ------------------------------------------------------------------------- the contract itself
def test_bad_input_is_one_json_object_or_one_line_naming_the_field(tmp_home: Path) -> None:
    """Bad option values, unknown options, missing options: exit 2, the field named, by both
    renderings; click's own usage errors follow the contract too."""
    err = contract(run("fleet", "init", "--preset", "nope", "--json"), 2, "preset")
    assert "nope" in err["error"]
    human(run("fleet", "init", "--preset", "nope"), 2, "preset")
    contract(run("fleet", "init", "--json"), 2, "preset")  # missing
    contract(run("fleet", "init", "--preset", "small", "--bogus", "--json"), 2, "bogus")
    contract(run("simulate", "--preset", "small", "--days", "x", "--json"), 2, "days")
    contract(
        run("train", "reconfigure", "--cluster", "c00", "--domain-size", "x", "--json"),
        2,
        "domain_size",
    )
    contract(run("train", "status", "--cluster", "a/b", "--json"), 2, "cluster")
    contract(run("ops", "plan", "--spec", "/nonexistent.yaml", "--json"), 2, "spec")
    assert tmp_home.exists() and not (tmp_home / "fleet.db").exists()


def test_failures_exit_1_by_the_contract(tmp_home: Path) -> None:
    """No fleet, Temporal unreachable: exit 1 with one line naming what to fix."""
    err = contract(run("fleet", "status", "--json"), 1, "fleet")
    assert "fleet init" in err["error"]
    contract(run("audit", "--json"), 1, "fleet")
    run("fleet", "init", "--preset", "small")
    err = contract(
        run("train", "status", "--cluster", "c00", "--address", "127.0.0.1:1", "--json"),
        1,
        "address",
    )
    assert "trainctl server" in err["error"]


def test_an_unexpected_error_is_one_line_not_a_traceback(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug surfaces as ``internal error: ...`` (exit 1), the traceback only on request."""
    import orchestrator.app.cli.fleet as fleet_cli

    run("fleet", "init", "--preset", "small")

    def broken(*args: object, **kwargs: object) -> dict[str, Any]:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(fleet_cli, "fleet_status", broken)
    err = contract(run("fleet", "status", "--json"), 1, None)
    assert err["error"].startswith("internal error: ZeroDivisionError: boom")
    line = run("fleet", "status")
    assert line.exit_code == 1 and "Traceback" not in line.output
    assert line.stderr.count("\n") == 1


def test_a_refused_plan_is_one_object_with_the_plan(tmp_home: Path) -> None:
    """`ops plan --json` refused: one object carrying both the error and the refused plan."""
    SqliteFleet.create(tmp_home / "fleet.db", get_preset("small"), 7, 1.0).close()
    spec = tmp_home / "op.json"
    spec.write_text(
        json.dumps(
            {
                "kind": "cuda-upgrade",
                "scope": {"cluster": "c00"},
                "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
                "consistency": "cluster",
            }
        )
    )
    result = run("ops", "plan", "--spec", str(spec), "--json")
    assert result.exit_code == 2
    (line,) = result.stdout.splitlines()
    out = json.loads(line)
    assert out["exit_code"] == 2 and out["error"].startswith("refused: ")
    assert out["refused"] and out["waves"] == []


# ------------------------------------------------------------------- item 5: numbers that run
@pytest.mark.parametrize("speed", ["1e308", "1e7", "1000001", "-1e308", "nan", "true"])
def test_speed_beyond_what_can_run_is_refused(tmp_home: Path, speed: str) -> None:
    """`fleet init --speed 1e308` used to succeed and make every later read spin for minutes."""
    err = contract(
        run("fleet", "init", "--preset", "small", "--speed", speed, "--json"), 2, "speed"
    )
    assert "max" in err["error"]
    assert list(tmp_home.iterdir()) == []


def test_the_fastest_speed_runs_and_a_stored_absurd_speed_is_refused(tmp_home: Path) -> None:
    """1e6 is accepted and its status answers at once; a fleet file whose speed was scribbled to
    1e308 (or written by an older trainctl) is refused as unusable, not simulated forever."""
    assert run("fleet", "init", "--preset", "small", "--speed", "1e6").exit_code == 0
    status = run("fleet", "status", "--json")
    assert status.exit_code == 0 and json.loads(status.stdout)["speed"] == 1e6
    conn = sqlite3.connect(tmp_home / "fleet.db")
    conn.execute("UPDATE meta SET value='1e308' WHERE key='speed'")
    conn.commit()
    conn.close()
    err = contract(run("fleet", "status", "--json"), 1, "fleet")
    assert "speed" in err["error"] and "--force" in err["error"]


def test_seeds_days_sizes_and_counts_are_bounded(tmp_home: Path) -> None:
    """Every number that drives work has a bound, and past it the field is named."""
    contract(run("fleet", "init", "--preset", "small", "--seed", "-1", "--json"), 2, "seed")
    contract(run("fleet", "init", "--preset", "small", "--seed", "9" * 30, "--json"), 2, "seed")
    sim = ("simulate", "--preset", "small", "--json")
    contract(run(*sim, "--days", "1e308"), 2, "days")
    contract(run(*sim, "--days", "inf"), 2, "days")
    contract(run(*sim, "--domain-size", "100000"), 2, "domain_size")
    contract(run(*sim, "--sweep", "domain-size=" + ",".join(map(str, range(1, 40)))), 2, "sweep")
    contract(run(*sim, "--sweep", "domain-size=1,99999"), 2, "domain_size")
    contract(run(*sim, "--seed", "-3"), 2, "seed")
    contract(
        run("train", "reconfigure", "--cluster", "c00", "--domain-size", "0", "--json"),
        2,
        "domain_size",
    )
    contract(
        run("train", "pause", "--cluster", "c00", "--reason", "x" * 501, "--json"), 2, "reason"
    )
    contract(run("server", "--port", "70000", "--json"), 2, "port")
    contract(run("worker", "--metrics-port", "-1", "--json"), 2, "metrics_port")


# ------------------------------------------------------------------- item 9: specs that break
def test_a_directory_or_binary_garbage_as_a_spec(tmp_home: Path, tmp_path: Path) -> None:
    """A directory, random bytes, NUL bytes, a missing file: exit 2 naming ``spec``, one line."""
    run("fleet", "init", "--preset", "small")
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(bytes(range(256)) * 8)
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"cluster: c00\n\x00\x00\n")
    utf16 = tmp_path / "utf16.yaml"
    utf16.write_text("cluster: c00\n", encoding="utf-16")
    for spec in (tmp_path, garbage, nul, utf16, tmp_path / "missing.yaml"):
        for command in (("train", "start"), ("ops", "plan")):
            err = contract(run(*command, "--spec", str(spec), "--json"), 2, "spec")
            assert "Error: utf-8" not in err["error"] and len(err["error"]) > 20
    human(run("train", "start", "--spec", str(garbage)), 2, "train spec")


# -------------------------------------------------------------- item 9: TRAINCTL_HOME that breaks
def test_home_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRAINCTL_HOME pointing at a file (or below one): exit 2 naming TRAINCTL_HOME."""
    home = tmp_path / "home"
    home.write_text("not a directory")
    msg = proc_contract(
        cli("fleet", "init", "--preset", "small", "--json", home=home), 2, "TRAINCTL_HOME"
    )
    assert str(home) in msg
    for where in (home, home / "below"):
        monkeypatch.setenv("TRAINCTL_HOME", str(where))
        for args in (("fleet", "init", "--preset", "small"), ("fleet", "status"), ("audit",)):
            assert str(home) in contract(run(*args, "--json"), 2, "TRAINCTL_HOME")["error"]
        human(run("fleet", "status"), 2, "TRAINCTL_HOME")
    assert home.read_text() == "not a directory"


def _mount_namespace_prefix() -> tuple[str, ...] | None:
    """A command prefix running in a private mount namespace, if this machine allows one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for prefix in ((unshare, "--mount"), (unshare, "--user", "--map-root-user", "--mount")):
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return prefix
    return None


def _in_mount_namespace(
    prefix: tuple[str, ...], setup: str, home: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run the CLI after the shell ``setup`` (mounts), inside the namespace ``prefix`` makes."""
    return subprocess.run(
        [*prefix, "sh", "-c", f'{setup} && exec "$@"', "sh", sys.executable, "-c", ENTRY, *args],
        cwd=REPO,
        env={**os.environ, "TRAINCTL_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_read_only_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only TRAINCTL_HOME (a fleet in it, or none): exit 2 naming TRAINCTL_HOME.

    Tests run as root, for whom permission bits do not make a directory read-only, so the home
    is made read-only for real: bind-mounted read-only in a private mount namespace
    (``unshare --mount``, or a user namespace where root cannot have one). On a machine that
    allows neither, the kernel's answer is simulated instead: ``os.access`` says not writable.
    """
    home = tmp_path / "home"
    home.mkdir()
    SqliteFleet.create(home / "fleet.db", get_preset("small"), 1, 3600.0).close()
    prefix = _mount_namespace_prefix()
    ro = f"mount --bind '{home}' '{home}' && mount -o remount,bind,ro '{home}' '{home}'"
    if prefix is not None:
        for args in (("fleet", "init", "--preset", "small", "--force"), ("versions", "mark",
                     "os=9.9", "--reason", "x")):  # fmt: skip
            p = _in_mount_namespace(prefix, ro, home, *args, "--json")
            assert "not writable" in proc_contract(p, 2, "TRAINCTL_HOME")
        # A command that only reads needs no write (issue 24, item 10), nor a home to create.
        p = _in_mount_namespace(prefix, ro, home, "fleet", "status", "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["hosts_total"] == 128, p.stderr
        p = _in_mount_namespace(prefix, ro, home / "sub", "fleet", "status", "--json")
        assert "no fleet" in proc_contract(p, 1, "fleet")
        return
    monkeypatch.setenv("TRAINCTL_HOME", str(home))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if Path(p) == home else real_access(p, m))
    contract(run("fleet", "status", "--json"), 2, "TRAINCTL_HOME")


def _small_files(limit: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails, rather than kill

    return preexec


def test_full_disk(tmp_path: Path) -> None:
    """A disk that fills while a fleet is written or advanced: exit 1 naming TRAINCTL_HOME, and
    nothing half-written left behind.

    A real full file system where the machine allows mounting one (a 32 KiB tmpfs in a private
    mount namespace), and in any case a file-size limit (RLIMIT_FSIZE), which fails writes
    past it the way a full disk does, for any user.
    """
    home = tmp_path / "home"
    home.mkdir()
    p = cli("fleet", "init", "--preset", "small", "--json", home=home, preexec=_small_files(32768))
    assert "TRAINCTL_HOME" in proc_contract(p, 1, "TRAINCTL_HOME")
    assert list(home.iterdir()) == []
    # An existing fleet that cannot grow: status advances it and has to write.
    SqliteFleet.create(home / "fleet.db", get_preset("small"), 1, 1e6).close()
    size = (home / "fleet.db").stat().st_size
    p = cli("fleet", "status", "--json", home=home, preexec=_small_files(size))
    assert p.returncode in (0, 1), p.stderr  # 0 if what changed fit in the file's free pages
    assert "Traceback" not in p.stderr
    if p.returncode == 1:
        proc_contract(p, 1, "TRAINCTL_HOME")
    prefix = _mount_namespace_prefix()
    if prefix is not None:
        full = tmp_path / "full"
        full.mkdir()
        p = _in_mount_namespace(
            prefix,
            f"mount -t tmpfs -o size=32k tmpfs '{full}'",
            full,
            "fleet",
            "init",
            "--preset",
            "small",
            "--json",
        )
        assert "disk is full" in proc_contract(p, 1, "TRAINCTL_HOME")


# --------------------------------------------------------------- item 9: a fleet file that breaks
def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how.startswith("truncate"):
        path.write_bytes(data[: len(data) * int(how.split(":")[1]) // 100])
    elif how.startswith("scribble"):
        at = int(how.split(":")[1])
        path.write_bytes(
            data[:at] + bytes((i * 37 + 11) % 256 for i in range(3000)) + data[at + 3000 :]
        )
    elif how == "garbage":
        path.write_bytes(os.urandom(5000))
    elif how == "empty":
        path.write_bytes(b"")
    else:  # an SQL statement
        conn = sqlite3.connect(path)
        conn.execute(how)
        conn.commit()
        conn.close()


@pytest.mark.parametrize(
    "how",
    [
        "empty",
        "garbage",
        "truncate:1",
        "truncate:50",
        "truncate:90",
        "scribble:0",
        "scribble:100",
        "scribble:4096",
        "scribble:20000",
        "DELETE FROM meta WHERE key='preset'",
        "UPDATE meta SET value='meta-1m' WHERE key='preset'",
        "UPDATE meta SET value='zz' WHERE key='schema_version'",
        "UPDATE meta SET value='yesterday' WHERE key='anchor_wall'",
        "UPDATE meta SET value='-1' WHERE key='seed'",
        "DROP TABLE hosts",
        "UPDATE clusters SET state='garbage'",
        "UPDATE hosts SET versions='[1' WHERE rowid=3",
    ],
)
def test_damaged_fleet_database(tmp_home: Path, how: str) -> None:
    """A truncated or scribbled fleet file: exit 1 naming ``fleet``, saying to rebuild it (not
    ``Error: preset`` with exit 2, not a traceback), for every command that reads the fleet."""
    path = tmp_home / "fleet.db"
    SqliteFleet.create(path, get_preset("small"), 1, 3600.0).close()
    _damage(path, how)
    for args in (("fleet", "status"), ("audit",), ("train", "status", "--cluster", "c00")):
        result = run(*args, "--json")
        if how.startswith(("UPDATE clusters", "UPDATE hosts", "DROP")) and args[0] != "fleet":
            continue  # only reading the hosts and the cluster's state meets this damage
        err = contract(result, 1, "fleet")
        assert "fleet init --force" in err["error"], err


def test_damaged_fleet_is_permanent_for_activities(tmp_path: Path) -> None:
    """Opening a damaged fleet raises FleetUnreadable, a NoFleet: activities do not retry it."""
    from orchestrator.contracts.errors import PERMANENT_KINDS, NoFleet

    path = tmp_path / "fleet.db"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(FleetUnreadable) as caught:
        SqliteFleet(path)
    assert isinstance(caught.value, NoFleet) and caught.value.kind in PERMANENT_KINDS
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(FleetUnreadable):
        SqliteFleet(tmp_path / "dir.db")


def test_worker_refuses_a_damaged_fleet_at_once(tmp_path: Path) -> None:
    """`trainctl worker` on a damaged fleet exits 1 in one line before it connects anywhere."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "fleet.db").write_bytes(os.urandom(4096))
    p = cli("worker", "--metrics-port", "0", "--address", "127.0.0.1:1", "--json", home=home)
    assert "not a usable fleet" in proc_contract(p, 1, "fleet")


def test_fleet_create_checks_its_arguments(tmp_path: Path) -> None:
    """The library refuses what the CLI refuses: a speed past 1e6, a negative seed."""
    small = get_preset("small")
    for seed, speed in ((1, 1e308), (1, float("nan")), (-1, 1.0), (True, 1.0)):
        with pytest.raises(ValueError):
            SqliteFleet.create(tmp_path / "f.db", small, seed, speed)  # type: ignore[arg-type]
    assert not (tmp_path / "f.db").exists()


def test_every_command_takes_json() -> None:
    """Every command of the CLI accepts --json (the contract's rendering needs it)."""
    import click

    def commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
        out = []
        for name, cmd in group.commands.items():
            if isinstance(cmd, click.Group):
                out += commands(cmd, f"{prefix}{name} ")
            else:
                out.append((prefix + name, cmd))
        return out

    missing = [
        name
        for name, cmd in commands(main, "")
        if not any("--json" in getattr(p, "opts", []) for p in cmd.params)
    ]
    assert missing == []


def test_inject_fault_names_its_fields(tmp_home: Path) -> None:
    """fleet inject-fault: unknown component, malformed version, unknown cluster, each by name."""
    run("fleet", "init", "--preset", "small")
    base = ("fleet", "inject-fault", "--cluster", "c00", "--json")
    contract(run(*base, "--component", "kernel", "--version", "1"), 2, "component")
    contract(run(*base, "--component", "os", "--version", "bad version!"), 2, "version")
    contract(run(*base, "--component", "os", "--version", "6.10", "--rate", "2"), 2, "rate")
    bad_cluster = ("fleet", "inject-fault", "--cluster", "c99", "--component", "os")
    contract(run(*bad_cluster, "--version", "6.10", "--json"), 2, "cluster")
    ok = run(*base, "--component", "os", "--version", "6.10")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["version"] == "6.10"
    schema = run("ops", "schema", "--json")
    assert schema.exit_code == 0 and json.loads(schema.stdout)["title"] == "OperationSpec"
