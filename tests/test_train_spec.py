"""The train spec accepts the documented YAML and refuses bad input naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.contracts.specs import SpecError
from orchestrator.contracts.train_spec import load_train_spec

EXAMPLE = """
cluster: c00
domain_size: 8               # hosts per maintenance domain
budget: {max_unavailable: "3%", per_rack: 1}
targets: {os: "6.8.0-45", bios: "3.2", nic_firmware: "28.41.1000"}
drain: {max_wait: 4h}        # then evict, preferably right after a checkpoint
halt_after_failures: 3
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return load_train_spec(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as err:
        _load(tmp_path, text)
    message = str(err.value)
    assert "\n" not in message and err.value.field is not None
    return message


def test_documented_example_loads(tmp_path):
    """The spec from the issue parses into the values it says."""
    spec = _load(tmp_path, EXAMPLE)
    assert spec.domain_size == 8
    assert spec.budget.limit(3072) == 92 and spec.budget.per_rack == 1
    assert spec.targets["bios"] == "3.2" and spec.targets["os"] == "6.8.0-45"
    assert spec.drain.max_wait_hours == 4.0
    assert spec.targets["nic_firmware"] == "28.41.1000"
    assert spec.workflow_id == "train-c00"


@pytest.mark.parametrize("component", ["cuda", "gpu_driver"])
def test_upper_layer_targets_are_sent_to_bulk_operations(tmp_path, component):
    """A cuda or gpu_driver target is refused, naming it and pointing at trainctl ops."""
    msg = _error(tmp_path, EXAMPLE.replace('bios: "3.2"', f'{component}: "12.6"'))
    assert component in msg and "bulk operation" in msg


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ('max_unavailable: "3%"', "max_unavailable"),
        ('os: "6.8.0-45"', "kernel"),
        ("max_wait: 4h", "drain.max_wait"),
    ],
)
def test_bad_values_name_their_field(tmp_path, change, field):
    """Over-100% budgets, unknown components and negative durations each name the field."""
    bad = {
        "max_unavailable": 'max_unavailable: "150%"',
        "kernel": 'kernel: "6.8"',
        "drain.max_wait": "max_wait: -2h",
    }[field]
    msg = _error(tmp_path, EXAMPLE.replace(change, bad))
    assert field in msg, msg


def test_unknown_field_is_refused(tmp_path):
    """A misspelt field is an error, not silently ignored."""
    assert "domain_sise" in _error(tmp_path, EXAMPLE + "domain_sise: 4\n")


def test_unquoted_versions_keep_their_trailing_zeros(tmp_path):
    """`os: 6.10` unquoted is the version "6.10", not the number 6.1."""
    spec = _load(tmp_path, EXAMPLE.replace('bios: "3.2"', "bios: 3.10, bmc: 6.10"))
    assert spec.targets["bios"] == "3.10" and spec.targets["bmc"] == "6.10"
