"""The compaction of the MCP tools' schemas: what it drops, and that it drops nothing a call is
checked against (FastMCP validates arguments with the tool's pydantic model either way)."""

from __future__ import annotations

from app.mcp_server.identity import McpSettings
from app.mcp_server.schemas import compact_schema, inline_definitions
from app.mcp_server.tools import build_server


def test_titles_and_null_variants_go_and_bounds_stay() -> None:
    schema = {
        "title": "add_memoryArguments",
        "type": "object",
        "properties": {
            "content": {"title": "Content", "type": "string"},
            "ttl_s": {
                "title": "Ttl S",
                "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}],
                "default": None,
                "description": "seconds",
            },
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "filters": {"type": "object", "additionalProperties": True},
            "closed": {"type": "object", "additionalProperties": False},
        },
        "required": ["content"],
    }
    assert compact_schema(schema) == {
        "type": "object",
        "properties": {
            "content": {"type": "string"},
            "ttl_s": {"type": "number", "exclusiveMinimum": 0, "description": "seconds"},
            # Two real variants: kept as they are (only the title goes).
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            # JSON Schema's default goes; a closed object stays closed.
            "filters": {"type": "object"},
            "closed": {"type": "object", "additionalProperties": False},
        },
        "required": ["content"],
    }


async def test_a_compacted_tool_still_refuses_what_its_model_refuses() -> None:
    server = build_server(McpSettings(api_key="k", user_id="u"))
    listed = {tool.name: tool for tool in await server.list_tools()}
    ttl = listed["add_memory"].inputSchema["properties"]["ttl_s"]
    assert ttl["type"] == "number" and ttl["exclusiveMinimum"] == 0
    tool = server._tool_manager.get_tool("add_memory")
    assert tool is not None
    refused = None
    try:
        tool.fn_metadata.arg_model.model_validate({"content": "x", "ttl_s": -1})
    except ValueError as exc:
        refused = exc
    assert refused is not None and "ttl_s" in str(refused)


def test_definitions_are_inlined_unless_recursive() -> None:
    message = {"type": "object", "properties": {"content": {"type": "string"}}}
    schema = {
        "$defs": {"ChatMessage": message},
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": {"$ref": "#/$defs/ChatMessage"}},
            "first": {"$ref": "#/$defs/ChatMessage", "description": "the first"},
        },
    }
    assert inline_definitions(schema) == {
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": message},
            "first": {**message, "description": "the first"},
        },
    }
    tree = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"items": {"$ref": "#/$defs/Node"}}},
            }
        },
        "$ref": "#/$defs/Node",
    }
    assert inline_definitions(tree) == tree


async def test_an_inlined_definition_is_still_enforced() -> None:
    server = build_server(McpSettings(api_key="k", user_id="u"))
    listed = {tool.name: tool for tool in await server.list_tools()}
    items = listed["add_messages"].inputSchema["properties"]["messages"]["items"]
    assert items["properties"]["role"]["enum"] == ["user", "assistant", "system"]
    tool = server._tool_manager.get_tool("add_messages")
    assert tool is not None
    refused = None
    try:
        tool.fn_metadata.arg_model.model_validate({"messages": [{"content": "x", "role": "robot"}]})
    except ValueError as exc:
        refused = exc
    assert refused is not None and "role" in str(refused)
