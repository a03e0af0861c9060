"""Production connections: envconfig profiles, TEMPORAL_* and flags; mTLS; secrets never shown.

The mTLS test puts a TLS-terminating proxy (HAProxy, see ``tests/tls_helpers.py``) that demands
a client certificate signed by a CA made by ``openssl`` in front of a private dev server, and runs
the real worker and CLI through it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.cli import main as cli_main
from orchestrator.app.demo import free_port
from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.infra.connection import (
    REDACTED,
    ConnectionError_,
    ConnectionOptions,
    redact,
    resolve,
)
from tests.tls_helpers import Pki, make_pki, tls_proxy
from tests.train_helpers import TARGETS, make_fleet

KEY = "tk-SECRET-4f1c9e-do-not-print"
NAMESPACE = "trainctl-secure"
#: Variables of the developer's own shell that would change what a test resolves.
_ENV = [v for v in os.environ if v.startswith("TEMPORAL_")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in _ENV:
        monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/temporalio/temporal.toml


def _profile(path: Path, address: str, pki: Pki | None, api_key: str | None = KEY) -> Path:
    lines = ["[profile.secure]", f'address = "{address}"', f'namespace = "{NAMESPACE}"']
    if api_key:
        lines.append(f'api_key = "{api_key}"')
    if pki is not None:
        lines += [
            "[profile.secure.tls]",
            f'server_ca_cert_path = "{pki.ca}"',
            f'client_cert_path = "{pki.client_cert}"',
            f'client_key_path = "{pki.client_key}"',
            'server_name = "localhost"',
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------ resolution, no server
def test_profile_then_environment_then_flags(tmp_path, monkeypatch):
    """A flag beats TEMPORAL_*, which beats the profile; the key is never in repr or describe."""
    toml = _profile(tmp_path / "t.toml", "prof:7233", None)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(toml))
    monkeypatch.setenv("TEMPORAL_PROFILE", "secure")
    got = resolve()
    assert (got.address, got.namespace, got.api_key) == ("prof:7233", NAMESPACE, KEY)
    assert got.tls is True  # an API key means TLS unless told otherwise, as in the Temporal CLI
    monkeypatch.setenv("TEMPORAL_ADDRESS", "env:7233")
    assert resolve().address == "env:7233"
    flagged = resolve(ConnectionOptions(address="flag:7233", namespace="ns2", tls=False))
    assert (flagged.address, flagged.namespace, flagged.tls) == ("flag:7233", "ns2", False)
    assert KEY not in repr(got) and KEY not in json.dumps(got.describe())
    assert got.describe()["api_key"] is True
    assert redact(f"bad key {KEY}", got.secrets) == f"bad key {REDACTED}"


def test_flags_give_mtls_and_an_api_key_file(tmp_path):
    """--tls-ca/--tls-cert/--tls-key build mTLS; --api-key-file reads the key."""
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "key").write_text(KEY + "\n")
    got = resolve(
        ConnectionOptions(
            address="x:1",
            tls_ca=pki.ca,
            tls_cert=pki.client_cert,
            tls_key=pki.client_key,
            api_key_file=tmp_path / "key",
        )
    )
    assert got.api_key == KEY and got.describe()["mtls"] is True
    assert resolve(ConnectionOptions(local=True, address="y:2")).describe()["tls"] is False


@pytest.mark.parametrize(
    ("opts", "field"),
    [
        (ConnectionOptions(profile="nope"), "profile"),
        (ConnectionOptions(config_file=Path("/no/such.toml")), "config_file"),
        (ConnectionOptions(tls_ca=Path("/no/ca.pem")), "tls_ca"),
        (ConnectionOptions(tls_cert=Path(__file__)), "tls_key"),
        (ConnectionOptions(api_key_file=Path("/no/key")), "api_key_file"),
    ],
)
def test_bad_settings_name_the_field(opts, field):
    """Each unusable setting is refused naming the setting, before any connection."""
    with pytest.raises(ConnectionError_) as err:
        resolve(opts)
    assert err.value.field == field and str(err.value).startswith(f"{field}: ")


def test_cli_bad_profile_is_bad_input(tmp_path):
    """`train status --profile nope --json` exits 2 naming the profile, without a traceback."""
    toml = _profile(tmp_path / "t.toml", "x:1", None)
    res = CliRunner().invoke(
        cli_main,
        ["train", "status", "--cluster", "c00", "--config-file", str(toml), "--profile", "nope"]
        + ["--json"],
    )
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout.splitlines()[0])
    assert out["field"] == "profile" and "nope" in out["error"]


# ------------------------------------------------------------------------ real server
def _cli(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from orchestrator.app.cli import entrypoint; entrypoint()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _metrics(port: int) -> str:
    for _ in range(150):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                return r.read().decode()
        except OSError:
            time.sleep(0.2)
    raise AssertionError("no /metrics")


async def test_worker_and_cli_over_mtls_and_no_secret_leaks(tmp_path, tmp_home):
    """Through a proxy that demands a client certificate, the worker and CLI work with the right
    one (profile and TEMPORAL_*), are refused without it or with a stranger's, and the API key
    is in no log line, metric, CLI output or workflow history."""
    env = await WorkflowEnvironment.start_local(
        namespace=NAMESPACE,
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
    )
    outputs: list[str] = []
    try:
        pki = make_pki(tmp_path / "pki")
        backend = env.client.service_client.config.target_host
        with tls_proxy(pki, backend, tmp_path, require_client_cert=True) as addr:
            make_fleet(tmp_home, 36000.0)
            toml = _profile(tmp_path / "temporal.toml", addr, pki)
            base = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
            base["TRAINCTL_HOME"] = str(tmp_home)
            profiled = {**base, "TEMPORAL_CONFIG_FILE": str(toml), "TEMPORAL_PROFILE": "secure"}
            no_cert = {
                **base,
                "TEMPORAL_ADDRESS": addr,
                "TEMPORAL_NAMESPACE": NAMESPACE,
                "TEMPORAL_API_KEY": KEY,
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca),
                "TEMPORAL_TLS_SERVER_NAME": "localhost",
            }

            # Refused: no client certificate (env only), then a certificate the CA never signed.
            refused = _cli("worker", "--metrics-port", "0", "--json", env=no_cert)
            stranger = _cli(
                "train", "status", "--cluster", "c00", "--tls-cert", str(pki.other_cert),
                "--tls-key", str(pki.other_key), "--json", env=no_cert,
            )  # fmt: skip
            for p in (refused, stranger):
                outputs += [p.stdout, p.stderr]
                assert p.returncode == 1, p.stdout + p.stderr
                assert json.loads(p.stdout)["field"] == "address"
                assert "cannot reach Temporal at " + addr in p.stdout

            # The right certificate: a worker from the profile named by TEMPORAL_* variables.
            port = free_port(0)
            log = tmp_path / "worker.log"
            with log.open("w") as log_f:
                worker = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "from orchestrator.app.cli import entrypoint; entrypoint()",
                    ]
                    + ["worker", "--metrics-port", str(port), "--log-json"],
                    env=profiled,
                    stdout=log_f,
                    stderr=subprocess.STDOUT,
                )
                try:
                    spec_file = tmp_path / "train.yaml"
                    spec_file.write_text(
                        json.dumps({"cluster": "c00", "domain_size": 4, "targets": TARGETS})
                    )
                    flags = ["--config-file", str(toml), "--profile", "secure", "--json"]
                    started = _cli("train", "start", "--spec", str(spec_file), *flags, env=base)
                    outputs += [started.stdout, started.stderr]
                    assert started.returncode == 0, started.stdout + started.stderr
                    status: dict[str, Any] = {}
                    deadline = time.monotonic() + 120
                    while not status.get("visits_total"):
                        assert time.monotonic() < deadline, f"no visit over mTLS: {status}"
                        p = _cli("train", "status", "--cluster", "c00", "--json", env=profiled)
                        outputs += [p.stdout, p.stderr]
                        assert p.returncode == 0, p.stdout + p.stderr
                        status = json.loads(p.stdout)
                        await asyncio.sleep(0.5)
                    outputs.append(_metrics(port))
                    stop = _cli("train", "stop", "--cluster", "c00", "--json", env=profiled)
                    outputs += [stop.stdout, stop.stderr]
                    assert stop.returncode == 0, stop.stdout + stop.stderr
                finally:
                    worker.terminate()
                    assert worker.wait(timeout=60) == 0, "worker did not stop on SIGTERM"
            outputs.append(log.read_text())
            assert '"worker started"' in outputs[-1] or "worker started" in outputs[-1]

        # Nothing the workflows were given or recorded carries the key either.
        client = env.client
        async for wf in client.list_workflows():
            history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
            outputs.append(history.to_json())
        assert len(outputs) > 8
    finally:
        await env.shutdown()
    leaks = [o[max(0, o.find(KEY) - 80) : o.find(KEY) + 40] for o in outputs if KEY in o]
    assert not leaks, leaks


def test_log_lines_never_carry_a_resolved_secret(tmp_path):
    """Once a key is resolved, the log processor scrubs it from any line (an error quoting it)."""
    from orchestrator.infra.logging import redact_secrets

    (tmp_path / "key").write_text("tk-log-secret-77\n")
    resolve(ConnectionOptions(address="x:1", api_key_file=tmp_path / "key"))
    line = redact_secrets(None, "warning", {"event": "failed", "error": "bad tk-log-secret-77 x"})
    assert line["error"] == f"bad {REDACTED} x"
