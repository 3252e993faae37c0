"""The tools' input schemas as an agent reads them: every character of them is in its context
for the whole session, so what pydantic adds for people reading JSON Schema goes.

Only the advertised schema changes: FastMCP still validates each call's arguments against the
tool's pydantic model, and nothing dropped here is a bound or a type: each is implied by the
rest of the schema or by JSON Schema's defaults."""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import FastMCP

_NULL = {"type": "null"}
_DEFS_PREFIX = "#/$defs/"


class _Recursive(Exception):
    """A definition that refers to itself, directly or not: it cannot be inlined."""


def inline_definitions(schema: Any) -> Any:
    """`schema` with each `$ref` to its `$defs` replaced by the definition, and `$defs` gone: a
    definition's name and the reference to it are characters the agent reads for nothing. A
    recursive definition cannot be inlined: a schema with one is returned as it is."""
    if not isinstance(schema, dict) or "$defs" not in schema:
        return schema
    definitions = schema["$defs"]

    def inline(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
            name = ref.removeprefix(_DEFS_PREFIX)
            if name in seen:
                raise _Recursive(name)
            siblings = {key: value for key, value in node.items() if key != "$ref"}
            return {**inline(definitions[name], (*seen, name)), **inline(siblings, seen)}
        return {key: inline(value, seen) for key, value in node.items() if key != "$defs"}

    try:
        return inline(schema, ())
    except _Recursive:
        return schema


def compact_schema(node: Any) -> Any:
    """`title`s dropped (the property's name says it); an optional value's `anyOf: [T, null]`
    with `default: null` becomes T (it is optional by not being `required`);
    `additionalProperties: true` dropped (JSON Schema's default)."""
    if isinstance(node, list):
        return [compact_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: compact_schema(value)
        for key, value in node.items()
        if key != "title" and not (key == "additionalProperties" and value is True)
    }
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
        tool.parameters = compact_schema(inline_definitions(tool.parameters))
        tool.description = " ".join(tool.description.split())
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = compact_schema(tool.fn_metadata.output_schema)
