"""Invalid input by construction, fed to every spec loader and the options of the commands that
plan, start, reconfigure, init or simulate (issue 24, done-when): each is refused by the error
contract, before anything is connected to or written.

In process through click's ``CliRunner``, with secrets in the environment and in the Temporal
config file (an API key, the Prometheus password) and the profile's address on a closed port:
a command that connected before refusing its input would answer ``cannot reach Temporal``
(exit 1, field ``address``). For every example: exit 2, one JSON object on stdout naming a
field, no traceback, no secret anywhere in the output, and the fleet file unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from orchestrator.app.cli import main
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset

set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "trainctl-hypothesis"))

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
API_KEY = "S3CR3T-apikey-6d1f0b"
PROM_PASSWORD = "HUNTER2-prom-93aa"
SECRETS = (API_KEY, PROM_PASSWORD)

PROPERTY = settings(
    max_examples=100,
    deadline=timedelta(seconds=10),  # one CLI run, on a loaded 2-core machine
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BROKEN_TOML = {
    "dup.toml": f'[profile.default]\napi_key = "a"\napi_key = "{API_KEY}"\n',
    "open.toml": f'[profile.default]\napi_key = "{API_KEY}\n',
    "bare.toml": f"[profile.default]\napi_key = {API_KEY}\n",
    "type.toml": f'[profile.default]\napi_key = ["{API_KEY}"]\n',
    "table.toml": f'[profile.default\napi_key = "{API_KEY}"\n',
}


class World:
    """A home with a small fleet, a config file holding an API key, and the CLI's environment."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.fleet = self.home / "fleet.db"
        SqliteFleet.create(self.fleet, get_preset("small"), 1, 3600.0).close()
        port = _closed_port()
        toml = root / "temporal.toml"
        toml.write_text(f'[profile.default]\naddress = "127.0.0.1:{port}"\napi_key = "{API_KEY}"\n')
        self.env = {
            "TRAINCTL_HOME": str(self.home),
            "TEMPORAL_CONFIG_FILE": str(toml),
            "TEMPORAL_PROFILE": "default",
            "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "TEMPORAL_API_KEY": API_KEY,
            "TRAINCTL_PROMETHEUS_PASSWORD": PROM_PASSWORD,
            "TRAINCTL_DEBUG": "",
        }
        self.slurm_conf = root / "slurm.conf"
        self.slurm_conf.write_text("ClusterName=x\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
        for name, text in BROKEN_TOML.items():  # each quotes the API key where it breaks
            (root / name).write_text(text)
        self.digest = self.fingerprint()

    def fingerprint(self) -> str:
        """What the fleet holds (its rows, read-only), and the main file's bytes."""
        conn = sqlite3.connect(f"{self.fleet.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = "\n".join(conn.iterdump())
        finally:
            conn.close()
        return hashlib.sha256(rows.encode()).hexdigest()

    def spec_file(self, text: str | bytes, suffix: str = ".yaml") -> Path:
        path = self.root / f"spec-{uuid.uuid4().hex[:8]}{suffix}"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    def run(self, *args: str) -> dict[str, Any]:
        """Run ``trainctl ARGS --json`` and check the contract for bad input; the error."""
        res = CliRunner().invoke(main, [*args, "--json"], env=self.env)
        out = res.output
        assert res.exit_code == 2, (args, out)
        assert "Traceback" not in out and "Warning:" not in out, (args, out)
        for secret in SECRETS:
            assert secret not in out, (args, out)
        lines = res.stdout.splitlines()
        assert len(lines) == 1, (args, res.stdout)
        err = json.loads(lines[0])
        assert set(err) >= {"error", "field", "exit_code"} and err["exit_code"] == 2, err
        assert isinstance(err["field"], str) and err["field"], (args, err)
        assert "\n" not in err["error"]
        assert self.fingerprint() == self.digest, f"{args} changed the fleet"
        return err


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield World(tmp_path_factory.mktemp("hardening-properties"))


def top(field: str) -> str:
    return field.split(".", 1)[0]


# --------------------------------------------------------------------------- spec mutations
def _example(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict)
    return data


BAD_COUNT = st.sampled_from([0, -1, -100, "x", "1.5h", 1.5, "", [], {}, "1e999"])
BAD_LIMIT = st.sampled_from(["0%", "101%", "-3", "x%", "three", 0, -2, "", [], {"a": 1}])
BAD_DURATION = st.sampled_from(["-1h", "x", "4 hours", "", [], {"h": 4}, "1y"])
BAD_VERSION = st.sampled_from(["", " ", "a b", "x" * 200, [], {"v": 1}, "6.8\n0"])
BAD_CRON = st.sampled_from(["", " ", "* *", "61 * * * *", "* 25 * * *", "a b c d e", "* * * * * *"])
UNKNOWN_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12)


def train_mutations(fleet_hosts: int) -> st.SearchStrategy[tuple[str, Any]]:
    """(dotted field, a value no train start may accept there)."""
    return st.one_of(
        st.tuples(st.just("cluster"), st.sampled_from(["", "c 0", "c99", "x" * 100, 5, [], None])),
        st.tuples(st.just("domain_size"), st.one_of(BAD_COUNT, st.just(fleet_hosts + 1))),
        st.tuples(st.just("budget.max_unavailable"), BAD_LIMIT),
        st.tuples(st.just("budget.maintenance"), st.one_of(BAD_LIMIT, st.just("50%"))),
        st.tuples(st.just("budget.per_rack"), BAD_COUNT),
        st.tuples(st.just("targets.os"), BAD_VERSION),
        st.tuples(st.just("targets.gpu_driver"), st.just("560.35.03")),
        st.tuples(st.just("targets.nope"), st.just("1.0")),
        st.tuples(st.just("drain.max_wait"), BAD_DURATION),
        st.tuples(st.just("halt_after_failures"), st.sampled_from([-1, "x", []])),
        st.tuples(st.just("cycle_target"), BAD_DURATION),
        st.tuples(
            st.just("schedule"),
            st.builds(lambda c: {"windows": [{"cron": c, "duration": "6h"}]}, BAD_CRON),
        ),
        st.tuples(UNKNOWN_KEY.filter(lambda k: k not in _example("train.yaml")), st.just(1)),
    )


def ops_mutations() -> st.SearchStrategy[tuple[str, Any]]:
    return st.one_of(
        st.tuples(st.just("kind"), st.sampled_from(["", "nope", 5, []])),
        st.tuples(st.just("scope.cluster"), st.sampled_from(["", "c99", "c 0", 5])),
        st.tuples(st.just("targets.cuda"), BAD_VERSION),
        st.tuples(st.just("consistency"), st.sampled_from(["", "none", 3])),
        st.tuples(st.just("max_failures"), st.sampled_from([-1, "x", []])),
        st.tuples(st.just("request_id"), st.sampled_from(["", "a/b", "x" * 300, "a b"])),
        st.tuples(st.just("budget.max_unavailable"), BAD_LIMIT),
        st.tuples(st.just("budget.maintenance"), st.sampled_from(["90%", 200, "x"])),
        st.tuples(st.just("drain.max_wait"), BAD_DURATION),
        st.tuples(UNKNOWN_KEY.filter(lambda k: k not in _example("cuda.yaml")), st.just(1)),
    )


def campaign_mutations() -> st.SearchStrategy[tuple[str, Any]]:
    creds = f"http://admin:{PROM_PASSWORD}@127.0.0.1:1/"
    return st.one_of(
        st.tuples(st.just("name"), st.sampled_from(["", "a b", "x" * 100, "-x", "a/b"])),
        st.tuples(st.just("targets.os"), BAD_VERSION),
        st.tuples(st.just("scope.cluster"), st.sampled_from(["", "c 0", "z*", 5])),
        st.tuples(
            st.just("stages"), st.sampled_from([[], "x", [{"name": "a"}], [{"clusters": ["c00"]}]])
        ),
        st.tuples(
            st.just("stages"),
            st.builds(
                lambda h: [{"name": "canary", "clusters": ["c00"], "hosts": h}],
                st.sampled_from([0, 500, "x", "101%", -1]),
            ),
        ),  # fmt: skip
        st.tuples(
            st.just("gates"),
            st.sampled_from(
                [
                    {"prometheus": {"url": creds, "query": "up"}},
                    {"prometheus": {"url": "ftp://h", "query": "up"}},
                    {"prometheus": {"url": "http://h:1", "query": "up", "every": 5}},
                    {"prometheus": {"url": "http://h:1", "query": ""}},
                    {"prometheus": {"url": "http://h:1", "query": "u", "password_file": "/x"}},
                    {"max_failures": "x"},
                    {"max_failures": "200%"},
                ]
            ),
        ),
        st.tuples(st.just("train.domain_size"), BAD_COUNT),
        st.tuples(st.just("train.budget.maintenance"), st.sampled_from(["50%", "x", 0])),
        st.tuples(UNKNOWN_KEY.filter(lambda k: k not in _example("campaign.yaml")), st.just(1)),
    )


def _set(doc: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    node = out
    *parents, last = dotted.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[last] = value
    return out


def _dump(doc: dict[str, Any], as_json: bool) -> tuple[str, str]:
    if as_json:
        return json.dumps(doc), ".json"
    return yaml.safe_dump(doc, sort_keys=False), ".yaml"


@PROPERTY
@given(mutation=train_mutations(128), as_json=st.booleans())
def test_train_start_refuses_every_bad_spec(
    world: World, mutation: tuple[str, Any], as_json: bool
) -> None:
    field, value = mutation
    text, suffix = _dump(_set(_example("train.yaml"), field, value), as_json)
    err = world.run("train", "start", "--spec", str(world.spec_file(text, suffix)))
    assert top(err["field"]) in (top(field), "spec"), (field, value, err)


@PROPERTY
@given(mutation=ops_mutations(), as_json=st.booleans(), cmd=st.sampled_from(["plan", "start"]))
def test_ops_refuses_every_bad_spec(
    world: World, mutation: tuple[str, Any], as_json: bool, cmd: str
) -> None:
    field, value = mutation
    text, suffix = _dump(_set(_example("cuda.yaml"), field, value), as_json)
    err = world.run("ops", cmd, "--spec", str(world.spec_file(text, suffix)))
    assert top(err["field"]) in (top(field), "spec"), (field, value, err)


@PROPERTY
@given(mutation=campaign_mutations(), as_json=st.booleans(), cmd=st.sampled_from(["plan", "start"]))
def test_campaign_refuses_every_bad_spec(
    world: World, mutation: tuple[str, Any], as_json: bool, cmd: str
) -> None:
    field, value = mutation
    text, suffix = _dump(_set(_example("campaign.yaml"), field, value), as_json)
    err = world.run("campaign", cmd, "--spec", str(world.spec_file(text, suffix)))
    assert top(err["field"]) in (top(field), "spec"), (field, value, err)


GARBAGE = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200),
    st.sampled_from(
        [
            "", "   ", "null", "[]", "[1, 2]", "42", "'text'", "{a: 1", "a: [", "a: b: c",
            "\t- x", "\ufeff", "a: &x [*x]", "key: 1\nkey: 2\n", "{" * 200 + "}" * 200,
            "[" * 6000 + "]" * 6000,
        ]
    ),
)  # fmt: skip


@PROPERTY
@given(
    text=GARBAGE,
    suffix=st.sampled_from([".yaml", ".json", ".txt"]),
    command=st.sampled_from(
        [("train", "start"), ("ops", "plan"), ("ops", "start"), ("campaign", "plan"),
         ("campaign", "start")]
    ),
)  # fmt: skip
def test_every_spec_loader_refuses_garbage(
    world: World, text: str | bytes, suffix: str, command: tuple[str, str]
) -> None:
    world.run(*command, "--spec", str(world.spec_file(text, suffix)))


@settings(PROPERTY, max_examples=30)
@given(text=GARBAGE, suffix=st.sampled_from([".yaml", ".json"]))
def test_the_backend_config_loader_refuses_garbage(
    world: World, text: str | bytes, suffix: str
) -> None:
    path = world.spec_file(text, suffix)
    args = ["fleet", "init", "--backend", "slurm", "--slurm-conf", str(world.slurm_conf)]
    err = world.run(*args, "--force", "--backend-config", str(path))
    # Garbage that happens to be a valid (empty) config gets as far as the controller check.
    valid = err["field"] == "slurm_conf" and "no controller configured" in err["error"]
    assert top(err["field"]) == "backend_config" or valid, err


# --------------------------------------------------------------------------- command options
BAD_TEXT = st.sampled_from(["", " ", "x", "-1", "0", "1e999", "nan", "\x00", "💥", "9" * 40])

OPTION_CASES: dict[str, tuple[list[str], st.SearchStrategy[str], set[str]]] = {
    # name: (the command with its other (valid) options, bad values, fields it may name)
    "train reconfigure --budget": (
        ["train", "reconfigure", "--cluster", "c00", "--budget"],
        st.sampled_from(["", "x", "0%", "101%", "-1", "nan%"]),
        {"budget", "max_unavailable"},
    ),
    "train reconfigure --maintenance": (
        ["train", "reconfigure", "--cluster", "c00", "--maintenance"],
        st.sampled_from(["", "x", "0%", "101%", "-1"]),
        {"budget", "maintenance"},
    ),
    "train reconfigure --domain-size": (
        ["train", "reconfigure", "--cluster", "c00", "--domain-size"],
        st.sampled_from(["0", "-1", "x", "", "1.5", "99999"]),
        {"domain_size"},
    ),
    "train reconfigure --target": (
        ["train", "reconfigure", "--cluster", "c00", "--target"],
        st.sampled_from(["os", "os=", "=1", "nope=1", "gpu_driver=1", "cuda=1", "os=a b"]),
        {"target", "targets"},
    ),
    "train reconfigure --cluster": (
        ["train", "reconfigure", "--domain-size", "4", "--cluster"],
        st.sampled_from(["", "c 0", "x" * 100, "c/0", "c00;rm"]),
        {"cluster"},
    ),
    "fleet init --preset": (
        ["fleet", "init", "--preset"],
        st.sampled_from(["", "nope", "SMALL ", "x" * 100]),
        {"preset"},
    ),
    "fleet init --seed": (
        ["fleet", "init", "--preset", "small", "--seed"],
        BAD_TEXT.filter(lambda v: v != "0"),
        {"seed"},
    ),
    "fleet init --speed": (
        ["fleet", "init", "--preset", "small", "--force", "--speed"],
        st.sampled_from(["", "x", "-1", "0", "1e308", "nan", "inf", "1e7"]),
        {"speed"},
    ),
    "fleet init --backend": (
        ["fleet", "init", "--backend"], st.sampled_from(["", "k8s", "SIM"]), {"backend"}
    ),
    "fleet init --slurm-conf": (
        ["fleet", "init", "--backend", "slurm", "--slurm-conf"],
        st.sampled_from(["", "/nonexistent/slurm.conf", "/proc", "/dev/null"]),
        {"slurm_conf"},
    ),
    "simulate --days": (["simulate", "--preset", "small", "--days"], BAD_TEXT, {"days"}),
    "simulate --budget": (
        ["simulate", "--preset", "small", "--budget"],
        st.sampled_from(["", "x", "0%", "101%", "-1"]),
        {"budget"},
    ),
    "simulate --max-unavailable": (
        ["simulate", "--preset", "small", "--budget", "5%", "--max-unavailable"],
        st.sampled_from(["", "x", "1%", "0%", "101%"]),
        {"max_unavailable"},
    ),
    "simulate --policy": (
        ["simulate", "--preset", "small", "--policy"], st.sampled_from(["", "nope"]), {"policy"}
    ),
    "simulate --preset": (["simulate", "--preset"], st.sampled_from(["", "nope"]), {"preset"}),
    "simulate --domain-size": (
        ["simulate", "--preset", "small", "--domain-size"],
        st.sampled_from(["0", "-1", "x", "", "99999"]),
        {"domain_size"},
    ),
    "simulate --max-wait": (
        ["simulate", "--preset", "small", "--max-wait"],
        BAD_TEXT.filter(lambda v: v not in ("0", "9" * 40)),
        {"max_wait"},
    ),
    "simulate --cycle-target": (
        ["simulate", "--preset", "small", "--cycle-target"],
        st.sampled_from(["", "x", "-1h", "0"]),
        {"cycle_target"},
    ),
    "simulate --sweep": (
        ["simulate", "--preset", "small", "--sweep"],
        st.sampled_from(["", "x", "nope=1,2", "domain-size=", "domain-size=0,x"]),
        {"sweep", "domain_size", "domain-size"},
    ),
    "simulate --plot": (
        ["simulate", "--preset", "small", "--plot"],
        st.sampled_from(["/proc/nope.png", "/nonexistent/dir/x.png", "/"]),
        {"plot"},
    ),
    "ops start --cron": (
        ["ops", "start", "--spec", str(EXAMPLES / "cuda.yaml"), "--cron"],
        BAD_CRON,
        {"cron"},
    ),
    "campaign start --cron": (
        ["campaign", "start", "--spec", str(EXAMPLES / "campaign.yaml"), "--cron"],
        BAD_CRON,
        {"cron"},
    ),
    "train start --config-file": (
        ["train", "start", "--spec", str(EXAMPLES / "train.yaml"), "--config-file"],
        st.sampled_from([f"@{name}" for name in sorted(BROKEN_TOML)] + ["/nonexistent.toml"]),
        {"config_file"},
    ),
    "campaign start --config-file": (
        ["campaign", "start", "--spec", str(EXAMPLES / "campaign.yaml"), "--config-file"],
        st.sampled_from([f"@{name}" for name in sorted(BROKEN_TOML)]),
        {"config_file"},
    ),
    "train start --address": (
        ["train", "start", "--spec", str(EXAMPLES / "train.yaml"), "--address"],
        st.sampled_from(["garbage::::", "127.0.0.1:99999", "http://127.0.0.1:1", "host", ":1"]),
        {"address"},
    ),
}  # fmt: skip


@settings(PROPERTY, max_examples=300)
@given(case=st.sampled_from(sorted(OPTION_CASES)), data=st.data())
def test_bad_options_are_refused_naming_them(world: World, case: str, data: st.DataObject) -> None:
    args, values, fields = OPTION_CASES[case]
    value = data.draw(values, label=case)
    if value.startswith("@"):  # a file of the world's
        value = str(world.root / value[1:])
    err = world.run(*args, value)
    assert top(err["field"]) in fields or err["field"] in fields, (case, value, err)
