"""Bulk operations (OpsPlanner): the spec here; planning in ``orchestrator.planning.ops_plan``."""

from orchestrator.ops.spec import (
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
