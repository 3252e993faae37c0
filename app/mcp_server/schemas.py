"""The tools' input schemas as an agent reads them: every character of them is in its context
for the whole session, so what pydantic adds for people reading JSON Schema goes.

Only the advertised schema changes: FastMCP still validates each call's arguments against the
tool's pydantic model, so a bound or type dropped here would still be enforced (none is)."""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import FastMCP

_NULL = {"type": "null"}


def compact_schema(node: Any) -> Any:
    """`title`s dropped (the property's name says it); an optional value's `anyOf: [T, null]`
    with `default: null` becomes T (it is optional by not being `required`)."""
    if isinstance(node, list):
        return [compact_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: compact_schema(value) for key, value in node.items() if key != "title"}
    variants = out.get("anyOf")
    if isinstance(variants, list) and _NULL in variants:
        rest = [variant for variant in variants if variant != _NULL]
        if len(rest) == 1 and isinstance(rest[0], dict):
            del out["anyOf"]
            out = {**rest[0], **out}
            if "default" in out and out["default"] is None:
                del out["default"]
    return out


def compact_tool_schemas(server: FastMCP) -> None:
    """Compact the schemas of every tool the server has registered so far, and its
    description (a docstring's line breaks and indentation are spaces the agent pays for)."""
    for tool in server._tool_manager.list_tools():
        tool.parameters = compact_schema(tool.parameters)
        tool.description = " ".join(tool.description.split())
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = compact_schema(tool.fn_metadata.output_schema)
