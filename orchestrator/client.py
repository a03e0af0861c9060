"""The one way trainctl connects to Temporal.

Every client must use the pydantic data converter, or workflow inputs and results (pydantic models)
would not round-trip; funnelling all connections through :func:`connect` makes that impossible to
forget. The address and namespace follow the Temporal CLI's own environment variables, so one
``export TEMPORAL_ADDRESS=...`` points both tools at the same cluster.
"""

from __future__ import annotations

import os

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"


def resolve_address(address: str | None = None) -> str:
    """Return ``address``, else ``$TEMPORAL_ADDRESS``, else ``localhost:7233``."""
    return address or os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS


async def connect(address: str | None = None, namespace: str | None = None) -> Client:
    """Connect to Temporal with the pydantic data converter.

    Args:
        address: ``host:port`` of the frontend; defaults to ``$TEMPORAL_ADDRESS`` or
            ``localhost:7233``.
        namespace: defaults to ``$TEMPORAL_NAMESPACE`` or ``default``.
    """
    return await Client.connect(
        resolve_address(address),
        namespace=namespace or os.environ.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE,
        data_converter=pydantic_data_converter,
    )
