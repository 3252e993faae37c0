"""MCP server: the memory API as tools for agents (stdio, or streamable HTTP at /mcp).

The tools reach the service through its public REST API (cognis_client), so they obey the same
keys, validation and isolation as any other client. Who they act for comes from the server's
configuration or the connection's headers, never from the model's arguments.
"""
