"""The Kubernetes design proposal covers the backend interfaces and says it is not implemented.

The proposal maps every public method and property of ``FleetBackend`` and ``ClusterBackend``
onto Kubernetes; a method added to either interface later needs its line on the page, so the
proposal never silently falls behind the code it describes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.contracts.backend import ClusterBackend, FleetBackend

PAGE = Path(__file__).resolve().parent.parent / "docs" / "design" / "kubernetes.md"


def public_members(protocol: type) -> list[str]:
    """The interface's own public methods and properties."""
    return sorted(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    )


def section(text: str, heading: str) -> str:
    """The page's text under ``### heading``, up to the next heading of that level or above."""
    match = re.search(rf"^### {heading}\n(.*?)(?=^#{{1,3}} |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"the page has no section {heading}"
    return match.group(1)


def test_the_proposal_says_it_is_not_implemented() -> None:
    """The page is marked as a proposal before anything else is said."""
    head = PAGE.read_text()[:600]
    assert "Not implemented" in head


@pytest.mark.parametrize("protocol", [ClusterBackend, FleetBackend], ids=lambda p: p.__name__)
def test_every_backend_method_has_its_line(protocol: type) -> None:
    """Each public method and property of the interface has a row in its section."""
    members = public_members(protocol)
    assert len(members) > 10, members
    rows = section(PAGE.read_text(), protocol.__name__)
    missing = [name for name in members if f"| `{name}` |" not in rows]
    assert not missing, f"{PAGE.name} does not say how {protocol.__name__} maps: {missing}"
