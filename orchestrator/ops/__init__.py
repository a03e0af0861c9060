"""Bulk operations (OpsPlanner): the spec here, messages in ``types``, client calls in ``client``.

Planning is in ``orchestrator.planning.ops_plan``. ``client`` is not re-exported, so workflows
importing the spec and messages do not import the Temporal client with them.
"""

from orchestrator.contracts.ops_spec import (
    KINDS,
    DrainSpec,
    OperationSpec,
    Scope,
    Window,
    load_spec,
    operation_id,
    parse_spec_text,
    resolve_clusters,
    spec_json_schema,
)

__all__ = [
    "KINDS",
    "DrainSpec",
    "OperationSpec",
    "Scope",
    "Window",
    "load_spec",
    "operation_id",
    "parse_spec_text",
    "resolve_clusters",
    "spec_json_schema",
]
