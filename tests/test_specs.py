"""The one spec loader: versions stay as written, one budget rule, one-line errors naming fields."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.app.cli import main as cli_main
from orchestrator.app.cli.common import BadInput
from orchestrator.app.cli.train import parse_target_options
from orchestrator.contracts.models import CapacityBudget, DrainPolicy
from orchestrator.contracts.ops_spec import OperationSpec, load_spec, parse_spec_text
from orchestrator.contracts.specs import SpecError, SpecLoader, parse_spec
from orchestrator.contracts.train_spec import TrainSpec, check_train_change, load_train_spec
from orchestrator.contracts.train_types import TrainChange
from orchestrator.fleet import SqliteFleet
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.settings import MAX_SPEED

TRAIN = "cluster: c00\ndomain_size: 8\n"
OPS = "kind: cuda-upgrade\nscope: {cluster: c00}\n"
#: What every path says about a budget of 0.1% on a 128-host cluster.
REFUSED_BUDGET = "budget.max_unavailable: 0.1% of 128 hosts is below one host; " + (
    'allow at least one (e.g. "0.79%" or 1)'
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def train_error(tmp_path: Path, text: str, name: str = "train.yaml") -> SpecError:
    with pytest.raises(SpecError) as info:
        load_train_spec(write(tmp_path, name, text))
    return info.value


# --------------------------------------------------------------------------- versions as text
def test_unquoted_yaml_versions_stay_text_in_train_and_ops_specs(tmp_path: Path) -> None:
    """Unquoted `os: 6.10, bios: 3.10` load as "6.10" and "3.10" in a train and an ops spec."""
    targets = "targets: {os: 6.10, bios: 3.10}\n"
    train = load_train_spec(write(tmp_path, "train.yaml", TRAIN + targets))
    assert train.targets == {"os": "6.10", "bios": "3.10"}
    op = load_spec(
        write(tmp_path, "op.yaml", "kind: lower-layer\nscope: {cluster: c00}\n" + targets)
    )
    assert op.targets == {"os": "6.10", "bios": "3.10"}


@pytest.mark.parametrize("written", ["010", "0x10", "1:30", "1e3", "12.10", "0o17", "1_000"])
def test_number_looking_yaml_versions_are_kept_as_written(tmp_path: Path, written: str) -> None:
    """Octal, hex, sexagesimal, exponent and trailing-zero versions are the text written."""
    op = load_spec(write(tmp_path, "op.yaml", OPS + f"targets: {{cuda: {written}}}\n"))
    assert op.targets == {"cuda": written}
    train = load_train_spec(write(tmp_path, "train.yaml", TRAIN + f"targets: {{bmc: {written}}}\n"))
    assert train.targets == {"bmc": written}


def test_json_versions_stay_text(tmp_path: Path) -> None:
    """A JSON number `6.10` is "6.10" for both specs, and JSON numbers still fill number fields."""
    doc = '{"cluster": "c00", "domain_size": 16, "targets": {"os": 6.10, "bios": 3.10}}'
    train = load_train_spec(write(tmp_path, "train.json", doc))
    assert train.targets == {"os": "6.10", "bios": "3.10"} and train.domain_size == 16
    op = parse_spec_text(
        '{"scope": {"cluster": "c00"}, "targets": {"cuda": 12.10}, "max_failures": 2}'
    )
    assert op.targets == {"cuda": "12.10"} and op.max_failures == 2


@pytest.mark.parametrize("written", ["yes", "true", "on", "False"])
def test_boolean_version_is_refused_naming_the_field(tmp_path: Path, written: str) -> None:
    """A version YAML reads as a boolean is refused, naming `targets.os` and asking to quote it."""
    err = train_error(tmp_path, TRAIN + f"targets: {{os: {written}}}\n")
    assert err.field == "targets.os"
    assert str(err).startswith("targets.os: ") and "quote it" in str(err)


def test_booleans_null_and_numbers_still_load() -> None:
    """The loader still reads booleans and null, and pydantic turns number text into numbers."""
    data = yaml.load("a: true\nb: no\nc: null\nd: ~\ne: 8\n", Loader=SpecLoader)  # noqa: S506
    assert data == {"a": True, "b": False, "c": None, "d": None, "e": "8"}
    spec = parse_spec(
        TRAIN + "halt_failure_rate: 0.5\nbudget: {max_unavailable: 12, per_rack: 2}\n",
        TrainSpec,
        what="train spec",
    )
    assert spec.domain_size == 8 and spec.halt_failure_rate == 0.5
    assert spec.budget.max_unavailable == 12 and spec.budget.per_rack == 2


def test_reconfigure_target_parser_keeps_version_text() -> None:
    """`train reconfigure --target os=6.10` keeps "6.10"; a malformed option names `target`."""
    assert parse_target_options(("os=6.10", "bios = 3.10")) == {"os": "6.10", "bios": "3.10"}
    with pytest.raises(BadInput, match=r"^target: 'os6.10' is not component=version"):
        parse_target_options(("os6.10",))
    with pytest.raises(BadInput, match=r"^target\.cuda: .*bulk operation"):
        parse_target_options(("cuda=12.10",))


# ---------------------------------------------------------------------------- one budget rule
def test_budget_limit_is_the_true_floor() -> None:
    """A budget's limit may be 0 hosts; require_hosts refuses that, naming the field."""
    budget = CapacityBudget(max_unavailable="0.1%")
    assert budget.limit(128) == 0 and budget.limit(3072) == 3
    with pytest.raises(ValueError) as info:
        budget.require_hosts(128)
    assert str(info.value) == REFUSED_BUDGET
    assert budget.require_hosts(3072) == 3


def test_tiny_budget_refused_the_same_by_spec_and_reconfigure(tmp_home: Path) -> None:
    """0.1% of a 128-host cluster: `train start` and the reconfigure validator give one message."""
    SqliteFleet.create(tmp_home / "fleet.db", get_preset("small"), 7, MAX_SPEED).close()
    spec = write(tmp_home, "train.yaml", TRAIN + 'budget: {max_unavailable: "0.1%"}\n')
    args = ["train", "start", "--spec", str(spec), "--address", "127.0.0.1:1"]
    result = CliRunner().invoke(cli_main, args)
    assert result.exit_code == 2, result.output
    assert REFUSED_BUDGET in result.output

    change = TrainChange(budget=CapacityBudget(max_unavailable="0.1%"))
    with pytest.raises(ValueError) as info:
        check_train_change(change, hosts_total=128, phase="running")
    assert str(info.value) == REFUSED_BUDGET
    check_train_change(TrainChange(budget=CapacityBudget(max_unavailable="1%")), 128, "running")


def test_workflow_validator_uses_the_shared_rule() -> None:
    """ClusterTrain's reconfigure validator refuses the tiny budget with the same message."""
    from workflows.cluster_train import ClusterTrain

    state = SimpleNamespace(counts=SimpleNamespace(hosts_total=128), phase="running")
    train = SimpleNamespace(inp=SimpleNamespace(state=state))
    change = TrainChange(budget=CapacityBudget(max_unavailable="0.1%"))
    with pytest.raises(ValueError) as info:
        ClusterTrain._check_change(train, change)  # type: ignore[arg-type]
    assert str(info.value) == REFUSED_BUDGET


# ------------------------------------------------------------------------------ one drain spec
def test_train_and_ops_share_one_drain_model(tmp_path: Path) -> None:
    """Both specs' `drain` is DrainPolicy, read from `max_wait` and exposing `max_wait_hours`."""
    assert TrainSpec.model_fields["drain"].annotation is DrainPolicy
    assert OperationSpec.model_fields["drain"].annotation is DrainPolicy
    train = load_train_spec(write(tmp_path, "t.yaml", TRAIN + "drain: {max_wait: 90m}\n"))
    op = load_spec(
        write(tmp_path, "o.yaml", OPS + "targets: {cuda: 12.6}\ndrain: {max_wait: 2h}\n")
    )
    assert train.drain.max_wait_hours == 1.5 and op.drain.max_wait_hours == 2.0
    again = TrainSpec.model_validate(json.loads(train.model_dump_json()))
    assert again == train


# ---------------------------------------------------------------------------- one-line errors
@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (TRAIN + "domain_sise: 4\n", "domain_sise", "unknown field"),
        (TRAIN + "drain: {max_wiat: 4h}\n", "drain.max_wiat", "known: max_wait"),
        (TRAIN + 'budget: {max_unavailable: "150%"}\n', "budget.max_unavailable", "100%"),
        (TRAIN + "drain: {max_wait: -2h}\n", "drain.max_wait", "negative"),
        (TRAIN + "targets: {kernel: 6.9}\n", "targets.kernel", "unknown component"),
        (TRAIN + "targets: {os: 6.8 beta}\n", "targets.os", "malformed version"),
        (TRAIN + "targets: {cuda: 12.6}\n", "targets.cuda", "bulk operation"),
        ("cluster: c00\ndomain_size: lots\n", "domain_size", "valid integer"),
        ("domain_size: 8\n", "cluster", "missing"),
    ],
)
def test_validation_errors_are_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str, words: str
) -> None:
    """Each bad field gives one line starting with its dotted name, and `.field` holds it."""
    err = train_error(tmp_path, text)
    assert err.field == field
    assert str(err).startswith(f"{field}: ") and words in str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("train.yaml", "", "is empty"),
        ("train.yaml", "# nothing here\n", "is empty"),
        ("train.yaml", "- c00\n- c01\n", "mapping of fields"),
        ("train.yaml", "cluster: c00\n  x: [\n", "not valid YAML (line 2"),
        ("train.yaml", "cluster: c00\ncluster: c01\n", "duplicate key 'cluster'"),
        ("train.json", '{"cluster": "c00",}', "not valid JSON (line 1"),
        ("train.json", '{"cluster": "c00", "cluster": "c01"}', "duplicate key"),
        ("train.yaml", "cluster: !!python/object:os.system x\n", "not valid YAML"),
    ],
)
def test_file_errors_are_one_line_naming_the_file(
    tmp_path: Path, name: str, text: str, words: str
) -> None:
    """Empty files, top-level lists, syntax errors and duplicate keys: one line naming the file."""
    err = train_error(tmp_path, text, name)
    assert err.field is None
    assert str(err).startswith("train spec: ") and name in str(err) and words in str(err)
    assert "\n" not in str(err)


def test_missing_file_and_cli_give_one_line_without_traceback(tmp_home: Path) -> None:
    """A missing spec file is one line; the CLI exits 2 with the field, not a traceback."""
    with pytest.raises(SpecError, match=r"^train spec: no such file "):
        load_train_spec(tmp_home / "nope.yaml")
    spec = write(tmp_home, "train.yaml", TRAIN + "targets: {os: on}\n")
    result = CliRunner().invoke(cli_main, ["train", "start", "--spec", str(spec)])
    assert result.exit_code == 2, result.output
    assert "targets.os: version must be text" in result.output
    assert "Traceback" not in result.output
