"""Property-based tests of every spec loader and every update input (issue 10, standing tests).

For arbitrary YAML and JSON documents, and arbitrary ``--target`` options and live changes, the
outcome is one of two: a valid spec (or change) whose versions are exactly the text written,
or the error contract, exit 2 with a field named, one line. Never another exception, never a
hang: each case has a deadline, documents are bounded in size (so in memory), and the runs are
derandomised (the same examples every run, no example database written).

The documents are written as text, not dumped from Python values, so that versions appear the
way people write them: ``os: 6.10``, ``cuda: 010``, ``bios: 0x10``, ``bmc: 1:30``, unquoted.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from orchestrator.app.cli import main
from orchestrator.app.cli.common import EXIT_BAD_INPUT, BadInput, CliError, classify
from orchestrator.app.cli.train import parse_target_options
from orchestrator.contracts.models import LOWER_LAYER, UPPER_LAYER, Component
from orchestrator.contracts.ops_spec import OperationSpec, parse_spec_text
from orchestrator.contracts.specs import SpecError, parse_spec
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainChange

# Hypothesis keeps caches (the unicode charmap) in a directory; not in the repository.
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "trainctl-hypothesis"))

PROPERTY = settings(
    max_examples=200,
    deadline=timedelta(seconds=2),  # per case, on a loaded 2-core machine
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

COMPONENTS = [c.value for c in Component]
#: Text that YAML 1.1 or JSON would read as something else than the text, and plain versions.
TRICKY = [
    "6.10", "3.10", "12.10", "010", "0x10", "0o17", "1:30", "1e3", "1E+3", "1_000", ".5", "5.",
    "-1", "+1", ".inf", "-.inf", ".nan", "2024-01-15", "2024-01-15 10:00:00", "yes", "no", "on",
    "off", "true", "False", "null", "~", "Null", "6.8.0-45", "28.41.1000", "560.35.03",
    "1:2.3-4", "v1", "0", "00", "1.0", "9" * 70,
]  # fmt: skip
VERSION_CHARS = "0123456789.abcxyzXE+-_:"


def versions() -> st.SearchStrategy[str]:
    """Version-like raw text, unquoted in the document: tricky spellings and random ones."""
    return st.one_of(
        st.sampled_from(TRICKY),
        st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}", fullmatch=True),
        st.text(VERSION_CHARS, min_size=1, max_size=12),
    )


def scalars() -> st.SearchStrategy[str]:
    """Any raw YAML scalar text for a non-version field (numbers, words, nonsense)."""
    return st.one_of(
        st.sampled_from(TRICKY + ["8", "0", "-3", "10001", "1e308", "3%", "0.1%", "150%", "4h"]),
        st.integers(-(10**20), 10**20).map(str),
        st.text("abc019.%-_ ", min_size=1, max_size=10),
    )


def yaml_doc(fields: dict[str, Any], flow: bool) -> str:
    """``fields`` as YAML text; a value is raw scalar text, a dict of them, or a list of them."""

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return str(v)

    if flow:
        return value(fields) + "\n"
    return "".join(f"{k}: {value(v)}\n" for k, v in fields.items())


_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def json_doc(fields: dict[str, Any]) -> str:
    """``fields`` as JSON text: a raw scalar that is a JSON number stays a bare number."""

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if _JSON_NUMBER.fullmatch(v) or v in ("true", "false", "null"):
            return str(v)
        return json.dumps(v)

    return value(fields) + "\n"


def documents(fields: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[tuple[str, str]]:
    """(format, text) for a document of ``fields`` in block YAML, flow YAML or JSON."""

    def render(pair: tuple[dict[str, Any], str]) -> tuple[str, str]:
        doc, fmt = pair
        if fmt == "json":
            return fmt, json_doc(doc)
        return fmt, yaml_doc(doc, flow=fmt == "flow")

    return st.tuples(fields, st.sampled_from(["yaml", "flow", "json"])).map(render)


def mostly(valid: st.SearchStrategy[Any], junk: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` three times in four, ``junk`` otherwise: most documents get far enough for
    their versions to be checked, and every field still meets nonsense."""
    return st.one_of(valid, valid, valid, junk)


#: Versions that are well formed however YAML would type them if it typed them.
NUMERIC_VERSIONS = [v for v in TRICKY if re.fullmatch(r"[0-9][0-9.:_+-]*", v) and len(v) < 60]


def good_versions() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NUMERIC_VERSIONS),
        st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}(-[0-9]{1,2})?", fullmatch=True),
    )


def targets(components: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return mostly(
        st.dictionaries(st.sampled_from(components), good_versions(), min_size=1, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(COMPONENTS), st.sampled_from(["OS", "kernel", "gpu"])),
            versions(),
            max_size=4,
        ),
    )


def train_fields(
    cluster: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    count = st.integers(1, 64).map(str)
    optional = {
        "domain_size": mostly(count, scalars()),
        "budget": mostly(
            st.fixed_dictionaries(
                {"max_unavailable": st.sampled_from(["10%", "25%", "8", "100%"])},
                optional={"per_rack": count},
            ),
            st.one_of(
                scalars(),
                st.fixed_dictionaries(
                    {}, optional={"max_unavailable": scalars(), "per_rack": scalars()}
                ),
            ),
        ),
        "drain": st.fixed_dictionaries(
            {}, optional={"max_wait": mostly(st.sampled_from(["4h", "30m", "2"]), scalars())}
        ),
        "halt_after_failures": mostly(count, scalars()),
        "halt_failure_rate": mostly(st.sampled_from(["0.2", "1", "0.05"]), scalars()),
        "policy": st.sampled_from(["job-aware", "rolling-serial", "nope", "1"]),
        "stop_after_cycles": mostly(count, scalars()),
    }
    typo = st.fixed_dictionaries({}, optional={"domain_sise": scalars()})  # refused by name
    return st.tuples(
        st.fixed_dictionaries(
            {
                "cluster": mostly(st.just("c00"), scalars()) if cluster is None else cluster,
                "targets": mostly(targets(sorted(LOWER_LAYER - {"switch_firmware"})), scalars()),
            },
            optional=optional,
        ),
        mostly(st.just({}), typo),
    ).map(lambda t: {**t[0], **t[1]})


def ops_fields() -> st.SearchStrategy[dict[str, Any]]:
    scope = st.fixed_dictionaries(
        {"cluster": mostly(st.sampled_from(["c00", "c0*", "*"]), scalars())},
        optional={
            "racks": st.lists(st.sampled_from(["z00-r001", "z01-*", "c00-z00-r000"]), max_size=3),
            "hosts": mostly(
                st.lists(st.just("c00-z00-r000-h0*"), max_size=1), st.lists(scalars(), max_size=3)
            ),
        },
    )
    upper = targets(sorted(UPPER_LAYER))
    optional = {
        "consistency": st.sampled_from(["job", "job", "cluster", "rack"]),
        "max_failures": mostly(st.integers(0, 5).map(str), scalars()),
        "request_id": mostly(st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True), scalars()),
        "budget": st.fixed_dictionaries(
            {}, optional={"max_unavailable": mostly(st.sampled_from(["25%", "8"]), scalars())}
        ),
        "window": st.fixed_dictionaries(
            {}, optional={"max_unavailable": scalars(), "duration": scalars()}
        ),
        "drain": st.fixed_dictionaries({}, optional={"max_wait": scalars()}),
    }
    kind = mostly(
        st.just({"kind": "cuda-upgrade"}),
        st.fixed_dictionaries(
            {"kind": st.sampled_from(["lower-layer", "reboot", "drain-for-repair", "x"])}
        ),
    )
    typo = st.fixed_dictionaries({}, optional={"scope_typo": scalars()})
    return st.tuples(
        st.fixed_dictionaries(
            {"scope": scope, "targets": mostly(upper, scalars())}, optional=optional
        ),
        kind,
        mostly(st.just({}), typo),
    ).map(lambda t: {**t[1], **t[0], **t[2]})


def written_versions(doc: dict[str, Any]) -> dict[str, str]:
    """The targets the document spells, by component, as the text written."""
    t = doc.get("targets")
    return dict(t) if isinstance(t, dict) else {}


def assert_contract(err: Exception) -> str:
    """``err`` is what a loader may raise; by the CLI's contract it is exit 2 with a field."""
    assert isinstance(err, SpecError | ValueError | pydantic.ValidationError | CliError), repr(err)
    mapped = classify(err)
    assert isinstance(mapped, BadInput), repr(err)
    assert mapped.exit_code == EXIT_BAD_INPUT
    assert mapped.field, mapped.message
    assert "\n" not in mapped.message and mapped.message
    return mapped.field


def check_spec(
    model: type[TrainSpec] | type[OperationSpec], fmt: str, text: str, doc: Any
) -> tuple[bool, int]:
    """The property for one document; (loaded, how many written versions it checked)."""
    try:
        if model is TrainSpec:
            spec: TrainSpec | OperationSpec = parse_spec(
                text, TrainSpec, what="train spec", fmt="json" if fmt == "json" else "yaml"
            )
        else:
            spec = parse_spec_text(text)
    except Exception as err:  # noqa: BLE001 - the property is about every exception
        field = assert_contract(err)
        known = set(model.model_fields) | {"drain", "scope", "spec", "window", "duration"}
        assert field.split(".")[0] in known | set(doc), (field, text)
        return False, 0
    # A valid spec: it validates again as itself, and every version is the text as written.
    again = model.model_validate(spec.model_dump(by_alias=True))
    assert again == spec
    written = written_versions(doc)
    for comp, version in written.items():
        assert spec.targets[comp] == version, (comp, version, text)
    assert set(spec.targets) <= set(COMPONENTS)
    if isinstance(spec, TrainSpec):
        assert not set(spec.targets) & UPPER_LAYER
        assert 1 <= spec.domain_size <= 10_000
    return True, len(written)


def run_documents(
    model: type[TrainSpec] | type[OperationSpec], fields: st.SearchStrategy[dict[str, Any]]
) -> Counter[str]:
    """Run the property over generated documents; what it met, so it cannot pass vacuously."""
    met: Counter[str] = Counter()

    @PROPERTY
    @given(documents(fields))
    def prop(fmt_text: tuple[str, str]) -> None:
        fmt, text = fmt_text
        loaded, checked = check_spec(model, fmt, text, _reparse(fmt, text))
        met["loaded" if loaded else "refused"] += 1
        met["versions"] += checked
        met[fmt] += 1

    prop()
    return met


def test_train_spec_documents() -> None:
    """Arbitrary train specs (YAML block, YAML flow, JSON): a valid spec with versions as
    written, or exit 2 naming the field."""
    met = run_documents(TrainSpec, train_fields())
    assert met["loaded"] >= 10 and met["refused"] >= 10 and met["versions"] >= 10, met


def _reparse(fmt: str, text: str) -> dict[str, Any]:
    """The document's fields as written (raw text), read back without any typing."""
    import yaml

    class Raw(yaml.SafeLoader):
        pass

    Raw.yaml_implicit_resolvers = {}  # every scalar stays its text
    try:
        if fmt == "json":
            out = json.loads(text, parse_float=str, parse_int=str, parse_constant=str)
            return _texts(out) if isinstance(out, dict) else {}
        out = yaml.load(text, Loader=Raw)  # noqa: S506 - a SafeLoader
    except (ValueError, yaml.YAMLError):
        return {}
    return out if isinstance(out, dict) else {}


def _texts(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _texts(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_texts(x) for x in v]
    return "null" if v is None else ("true" if v is True else "false" if v is False else v)


def test_ops_spec_documents() -> None:
    """Arbitrary operation specs: a valid spec with versions as written, or exit 2 naming the
    field (the ops loader tells YAML and JSON apart by content)."""
    met = run_documents(OperationSpec, ops_fields())
    assert met["loaded"] >= 10 and met["refused"] >= 10 and met["versions"] >= 10, met


@PROPERTY
@given(st.text(max_size=300))
def test_any_text_is_a_spec_or_the_contract(text: str) -> None:
    """Any text at all (binary-ish, half YAML, half JSON) given to either loader."""
    for model in (TrainSpec, OperationSpec):
        try:
            parse_spec(text, model, what="spec")
        except Exception as err:  # noqa: BLE001
            assert_contract(err)


def target_options() -> st.SearchStrategy[list[str]]:
    option = st.one_of(
        st.tuples(st.sampled_from(COMPONENTS + ["OS", "gpu"]), versions()).map("=".join),
        st.tuples(st.sampled_from(COMPONENTS), st.text(max_size=8), st.text(" =", max_size=2))
        .map(lambda t: f"{t[0]}{t[2]}={t[1]}"),
        st.text(max_size=20),
    )  # fmt: skip
    return st.lists(option, max_size=4)


@PROPERTY
@given(target_options())
def test_reconfigure_target_options(options: list[str]) -> None:
    """``reconfigure --target`` options: versions exactly as typed (trimmed), lower layers only,
    or exit 2 naming ``target`` (or ``target.<component>``)."""
    try:
        out = parse_target_options(options)
    except Exception as err:  # noqa: BLE001
        field = assert_contract(err)
        assert field == "target" or field.startswith("target."), field
        return
    typed = {o.partition("=")[0].strip(): o.partition("=")[2].strip() for o in options}
    assert out == typed
    assert set(out) <= LOWER_LAYER


def live_changes() -> st.SearchStrategy[dict[str, Any]]:
    anything = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=True),
        st.text(max_size=8),
        st.dictionaries(st.sampled_from(["max_unavailable", "per_rack", "x"]), scalars()),
    )
    return st.dictionaries(
        st.sampled_from(["domain_size", "budget", "targets", "halt_after_failures", "domain_sise"]),
        anything,
        max_size=4,
    )


@PROPERTY
@given(live_changes())
def test_live_changes(change: dict[str, Any]) -> None:
    """A live ``reconfigure`` change as any client may send it (JSON-like values): a valid
    change with no boolean taken for a count and no unknown field, or exit 2 naming the field."""
    try:
        out = TrainChange.model_validate(change)
    except Exception as err:  # noqa: BLE001
        assert_contract(err)
        return
    assert set(change) <= set(TrainChange.model_fields)
    for name in ("domain_size", "halt_after_failures"):
        assert not isinstance(change.get(name), bool)
        value = getattr(out, name)
        assert value is None or value >= 1


@pytest.fixture(scope="module")
def fleet_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from orchestrator.fleet import SqliteFleet
    from orchestrator.fleet.presets import get_preset

    home = tmp_path_factory.mktemp("props-home")
    SqliteFleet.create(home / "fleet.db", get_preset("small"), 1, 3600.0).close()
    return home


def test_train_start_end_to_end(fleet_home: Path, tmp_path: Path) -> None:
    """Through the real command: `train start --spec F --json` is the contract's exit 2 with a
    field, or gets as far as Temporal (here: unreachable, exit 1 naming ``address``)."""
    met: Counter[int] = Counter()
    runner = CliRunner(env={"TRAINCTL_HOME": str(fleet_home)})

    @settings(PROPERTY, max_examples=60)
    @given(documents(train_fields(cluster=st.just("c00"))))  # the fleet's: to get past it
    def prop(fmt_text: tuple[str, str]) -> None:
        fmt, text = fmt_text
        spec = tmp_path / ("train.json" if fmt == "json" else "train.yaml")
        spec.write_text(text)
        args = ["train", "start", "--spec", str(spec), "--address", "127.0.0.1:1", "--json"]
        result = runner.invoke(main, args)
        (line,) = result.stdout.splitlines()
        out = json.loads(line)
        assert out["exit_code"] == result.exit_code and "Traceback" not in result.output
        if result.exit_code == EXIT_BAD_INPUT:
            assert out["field"], out
        else:
            assert (result.exit_code, out["field"]) == (1, "address"), out
        met[result.exit_code] += 1

    prop()
    assert met[EXIT_BAD_INPUT] >= 5 and met[1] >= 5, met


@pytest.mark.parametrize(
    "text",
    [
        "cluster: c00\ntargets: {os: 6.10, bios: 3.10, bmc: 010, nic_firmware: 0x10}\n",
        '{"cluster": "c00", "targets": {"os": 6.10, "bios": 3.10, "bmc": 1e3}}\n',
        "cluster: c00\ntargets:\n  os: 1:30\n  gpu_firmware: 2024-01-15\n",
    ],
)
def test_the_issues_versions_stay_as_written(text: str) -> None:
    """The examples of issue 10: 6.10 stayed 6.1, 010 became 8, 0x10 16, 1:30 90."""
    fmt = "json" if text.startswith("{") else "yaml"
    loaded, checked = check_spec(TrainSpec, fmt, text, _reparse(fmt, text))
    assert loaded and checked >= 2
