"""Counts in specs are whole numbers, never booleans; a YAML alias bomb is refused quickly."""

from __future__ import annotations

import time

import pytest

from orchestrator.contracts.specs import SpecError, parse_spec
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.ops import parse_spec_text


@pytest.mark.parametrize("field", ["domain_size", "halt_after_failures", "stop_after_cycles"])
def test_boolean_train_counts_are_refused(field: str) -> None:
    """`domain_size: true` is refused naming the field rather than read as 1."""
    with pytest.raises(SpecError) as info:
        parse_spec(f"cluster: c00\n{field}: true\n", TrainSpec, what="train spec")
    assert info.value.field == field


def test_boolean_ops_counts_are_refused() -> None:
    """`max_failures: true` in an ops spec is refused naming the field."""
    text = (
        'kind: cuda-upgrade\nscope: {cluster: c00}\ntargets: {cuda: "12.6"}\nmax_failures: true\n'
    )
    with pytest.raises(ValueError, match="max_failures"):
        parse_spec_text(text)


def test_alias_bomb_as_a_version_is_refused_quickly() -> None:
    """Nested aliases used as a version give a one-line error without expanding them."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i, (prev, cur) in enumerate(zip("abcdefgh", "bcdefghi", strict=True)):
        lines.append(f"{cur}: &{cur} [{', '.join('*' + prev for _ in range(9))}]")
        assert i < 9
    lines.append("cluster: c00")
    lines.append("targets: {os: *i}")
    start = time.monotonic()
    with pytest.raises(SpecError) as info:
        parse_spec("\n".join(lines) + "\n", TrainSpec, what="train spec")
    assert time.monotonic() - start < 20  # a guard against a hang, not a speed test
    assert "\n" not in str(info.value) and str(info.value).startswith("targets.os:")
