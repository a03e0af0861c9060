"""The one way trainctl connects to Temporal.

Every client must use the pydantic data converter, or workflow inputs and results (pydantic models)
would not round-trip; funnelling all connections through :func:`connect` makes that impossible to
forget. Where and how to connect (address, namespace, TLS/mTLS, API key) is resolved by
:mod:`orchestrator.infra.connection` from the ``temporalio.envconfig`` profile, ``TEMPORAL_*`` and
flags, so one ``temporal.toml`` or ``export TEMPORAL_ADDRESS=...`` points both tools at the same
cluster.
"""

from __future__ import annotations

import dataclasses
import logging

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from orchestrator.infra.connection import (
    DEFAULT_ADDRESS,
    DEFAULT_NAMESPACE,
    ConnectionOptions,
    Resolved,
    resolve,
)

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_NAMESPACE", "connect", "connect_resolved", "resolve_address"]


def resolve_address(address: str | None = None) -> str:
    """Return ``address``, else the profile's or ``$TEMPORAL_ADDRESS``, else ``localhost:7233``."""
    try:
        return resolve(ConnectionOptions(address=address)).address
    except ValueError:
        return address or DEFAULT_ADDRESS


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    options: ConnectionOptions | None = None,
) -> Client:
    """Connect to Temporal with the pydantic data converter.

    Args:
        address: ``host:port`` of the frontend; overrides ``options`` and the profile.
        namespace: overrides ``options`` and the profile.
        options: flags and profile choice (:class:`ConnectionOptions`); by default the
            envconfig profile and ``TEMPORAL_*`` decide, then ``localhost:7233``/``default``.
    """
    opts = options or ConnectionOptions()
    opts = dataclasses.replace(
        opts, address=address or opts.address, namespace=namespace or opts.namespace
    )
    return await connect_resolved(resolve(opts))


def forward_core_logs() -> None:
    """Send the SDK core's own log lines (Rust) through Python logging, to stderr.

    By default the core prints them on stdout, where they would break a command's ``--json``
    (a loaded machine makes the core warn, e.g. "Task not found when completing"). Idempotent;
    it must run before the first client or worker, when the default runtime is created.
    """
    global _FORWARDING
    if _FORWARDING:
        return
    _FORWARDING = True
    logging_config = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )
    Runtime.set_default(
        Runtime(telemetry=TelemetryConfig(logging=logging_config)), error_if_already_set=False
    )


_FORWARDING = False


async def connect_resolved(conn: Resolved) -> Client:
    """Connect with settings already resolved (the CLI resolves first to report errors)."""
    forward_core_logs()
    return await Client.connect(
        conn.address, data_converter=pydantic_data_converter, **conn.connect_kwargs()
    )
