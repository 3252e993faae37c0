"""Characters of the MCP tools: their listing, and per result compact (default) against full.

An agent pays for every character of a tool's result in its context window. Against a running
API (`--url`, `--key`), this adds `--memories` memories for a throwaway user through MCP at
/mcp, counts the characters of tools/list (the tools' schemas, paid by every session), then
calls search_memories (top_k 3) and list_memories (limit 10) both ways and prints
the characters of each result (its JSON, as the model reads it) and per memory. The user is
erased at the end. Prints numbers; asserts nothing. Not a test.

    python -m bench.mcp_results --url http://127.0.0.1:8000 --key cognis-dev-key
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

import httpx
from cognis_client import AsyncCognisClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

FACTS = [
    ("Noor lives in Osaka with her partner.", "personal_details", "2026-03-01T00:00:00+00:00"),
    ("Noor is allergic to peanuts.", "health", None),
    ("Noor swims every Sunday morning.", "hobbies", "2026-11-01T09:00:00+00:00"),
    ("Noor prefers aisle seats on long flights.", "preferences", None),
    ("Noor works as a structural engineer.", "professional", None),
    ("Noor's sister Lea lives in Lyon.", "personal_details", None),
    ("Noor is learning Finnish.", "hobbies", "2026-10-15T00:00:00+00:00"),
    ("Noor drinks her coffee black.", "preferences", None),
    ("Noor runs a half marathon in April.", "goals", "2027-04-12T00:00:00+00:00"),
    ("Noor keeps bees on her roof.", "hobbies", None),
]


def _payload(result: Any) -> Any:
    if result.isError:
        raise RuntimeError(" ".join(getattr(c, "text", "") for c in result.content))
    if result.structuredContent is not None:
        return result.structuredContent
    return json.loads(result.content[0].text)


def _text(result: Any) -> str:
    """The characters the model reads: the tool result's text content."""
    return "".join(getattr(c, "text", "") for c in result.content)


async def measure(url: str, key: str, memories: int) -> dict[str, dict[str, float]]:
    user = f"bench-mcp-{uuid.uuid4().hex[:8]}"
    headers = {"X-API-Key": key, "X-Cognis-User": user}
    figures: dict[str, dict[str, float]] = {}
    try:
        async with (
            httpx.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            # What every session pays before any call: the tools' names, descriptions and
            # schemas as tools/list sends them.
            tools = (await session.list_tools()).tools
            listing = len(json.dumps([t.model_dump(exclude_none=True) for t in tools]))
            figures["tools/list (every session)"] = {
                "results": len(tools),
                "chars": listing,
                "chars_per_result": listing / len(tools),
            }
            for content, category, event_time in (FACTS * (memories // len(FACTS) + 1))[:memories]:
                arguments: dict[str, Any] = {"content": content, "category": category}
                if event_time:
                    arguments["event_time"] = event_time
                _payload(await session.call_tool("add_memory", arguments))
            calls: dict[str, tuple[str, dict[str, Any], str]] = {
                "search_memories top_k 3": (
                    "search_memories",
                    {"query": "What does Noor do on weekends?", "top_k": 3},
                    "results",
                ),
                "list_memories limit 10": ("list_memories", {"limit": 10}, "items"),
            }
            for name, (tool, arguments, items) in calls.items():
                for detail in ("compact", "full"):
                    result = await session.call_tool(tool, {**arguments, "detail": detail})
                    count = len(_payload(result)[items])
                    chars = len(_text(result))
                    figures[f"{name}, {detail}"] = {
                        "results": count,
                        "chars": chars,
                        "chars_per_result": chars / max(count, 1),
                    }
    finally:
        async with AsyncCognisClient(url, api_key=key) as cognis:
            await cognis.erase_user(user)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", default="cognis-dev-key")
    parser.add_argument("--memories", type=int, default=10)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.url, args.key, args.memories))
    print(f"{'call':<36} {'results':>7} {'chars':>7} {'chars/result':>12}")
    for name, row in figures.items():
        print(
            f"{name:<36} {row['results']:>7.0f} {row['chars']:>7.0f} "
            f"{row['chars_per_result']:>12.0f}"
        )


if __name__ == "__main__":
    main()
