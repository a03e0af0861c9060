"""A fleet's identity: one id written at ``fleet init``, kept in the fleet's store.

Workers announce the id of the fleet they serve in their Temporal identity
(``pid@host fleet=<id>``), so a command that reaches a Temporal server whose workers serve
another fleet (another ``TRAINCTL_HOME``'s server holding the default port) can say so instead
of steering someone else's trains. Several workers with their own homes on one shared store
read the same id from it, so they are one fleet. Files from before the id carry none: nothing
is checked for them.
"""

from __future__ import annotations

import re
import uuid

from orchestrator.fleet.ledger_files import peek_meta
from orchestrator.fleet.store_url import StoreRef

#: The meta key of the id in the fleet's store.
META_KEY = "fleet_id"
#: How a worker's identity carries the id.
IDENTITY_TAG = "fleet="
_TAG = re.compile(r"\bfleet=([0-9a-f]+)\b")


def new_fleet_id() -> str:
    """A fresh id (random: two fleets built alike are still two fleets)."""
    return uuid.uuid4().hex[:16]


def read_fleet_id(path: StoreRef) -> str | None:
    """The id of the fleet stored at ``path`` (read-only, no migration); None if none."""
    return peek_meta(path, META_KEY)


def worker_identity(base: str, fleet_id: str | None) -> str:
    """A worker's Temporal identity, with the fleet it serves."""
    return base if fleet_id is None else f"{base} {IDENTITY_TAG}{fleet_id}"


def identity_fleet(identity: str) -> str | None:
    """The fleet id a worker's identity announces, if any."""
    m = _TAG.search(identity)
    return None if m is None else m.group(1)
