"""Characters of the MCP tools: their listing per session, and per result compact against full.

An agent pays for every character of the tool listing (tools/list: names, descriptions, input
and output schemas) and of the server's instructions in every session, and for every character
of a tool's result in its context window.

The listing: this tree's, and that of `--before` (a git revision; default: the tools as issue 41
found them), each built in a Python process from that revision's `app/` and client and counted
as tools/list sends it (JSON of the tools, `exclude_none`, json.dumps' default separators).
`--listing` prints only that, and needs no service.

Against a running API (`--url`, `--key`), it also counts the listing over /mcp, adds
`--memories` memories for a throwaway user through MCP, then calls search_memories (top_k 3) and
list_memories (limit 10) compact and with full=true and prints the characters of each result
(its text, as the model reads it) and per memory. The user is erased at the end. Prints
numbers; asserts nothing. Not a test.

    python -m bench.mcp_results --url http://127.0.0.1:8000 --key cognis-dev-key
    python -m bench.mcp_results --listing
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
from cognis_client import AsyncCognisClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
# The tools as issue 41 found them: the commit before its first cut of the listing.
BEFORE = "db222d1^"
# Run in a checkout's root: its MCP server's listing and instructions, as JSON on stdout.
_LISTING_SCRIPT = """
import asyncio, json
from app.mcp_server.identity import McpSettings
from app.mcp_server.tools import build_server
server = build_server(McpSettings(api_key="k", user_id="u"))
tools = asyncio.run(server.list_tools())
print(json.dumps({"tools": [t.model_dump(mode="json", exclude_none=True) for t in tools],
                  "instructions": server.instructions or ""}))
"""

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


def listing_figures(tools: list[dict[str, Any]], instructions: str) -> dict[str, float]:
    """What a session pays before any call: the tools as tools/list sends them, and the
    server's instructions (from initialize)."""
    listing = len(json.dumps(tools))
    return {
        "tools": len(tools),
        "listing": listing,
        "per_tool": listing / len(tools),
        "instructions": len(instructions),
        "session": listing + len(instructions),
    }


def listing_of(checkout: Path) -> dict[str, float]:
    """The listing of the MCP server in `checkout` (its app/ and clients/python), built in a
    process of its own so that two revisions' modules never meet."""
    env = {**os.environ, "PYTHONPATH": f"{checkout}:{checkout / 'clients' / 'python'}"}
    printed = subprocess.run(  # noqa: S603 - our own interpreter, our own script
        [sys.executable, "-c", _LISTING_SCRIPT],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = json.loads(printed.splitlines()[-1])
    return listing_figures(listed["tools"], listed["instructions"])


def listing_at(revision: str) -> dict[str, float] | None:
    """The listing at a git revision of this repository; None (and why, on stderr) where the
    clone does not have it (a shallow clone)."""
    with tempfile.TemporaryDirectory(prefix="cognis-mcp-listing-") as checkout:
        archive = subprocess.run(  # noqa: S603
            ["git", "archive", revision, "app", "clients/python"],  # noqa: S607
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            print(f"no listing for {revision}: {archive.stderr.decode().strip()}", file=sys.stderr)
            return None
        subprocess.run(  # noqa: S603
            ["tar", "-x", "-C", checkout],  # noqa: S607
            input=archive.stdout,
            check=True,
        )
        return listing_of(Path(checkout))


def print_listings(listings: dict[str, dict[str, float] | None]) -> None:
    print(
        f"{'MCP listing per session':<36} {'tools':>5} {'tools/list':>10} {'per tool':>8} "
        f"{'instructions':>12} {'session':>8}"
    )
    for name, row in listings.items():
        if row is None:
            continue
        print(
            f"{name:<36} {row['tools']:>5.0f} {row['listing']:>10,.0f} {row['per_tool']:>8,.0f} "
            f"{row['instructions']:>12,.0f} {row['session']:>8,.0f}"
        )


async def measure(
    url: str, key: str, memories: int
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The listing as /mcp sends it, and the characters of each result."""
    user = f"bench-mcp-{uuid.uuid4().hex[:8]}"
    headers = {"X-API-Key": key, "X-Cognis-User": user}
    figures: dict[str, dict[str, float]] = {}
    try:
        async with (
            httpx.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            initialized = await session.initialize()
            tools = (await session.list_tools()).tools
            listing = listing_figures(
                [t.model_dump(mode="json", exclude_none=True) for t in tools],
                initialized.instructions or "",
            )
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
                    result = await session.call_tool(tool, {**arguments, "full": detail == "full"})
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
    return listing, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", default="cognis-dev-key")
    parser.add_argument("--memories", type=int, default=10)
    parser.add_argument(
        "--before",
        default=BEFORE,
        help="git revision whose listing to compare (default: %(default)s)",
    )
    parser.add_argument(
        "--listing", action="store_true", help="only the listings, built here: no service needed"
    )
    args = parser.parse_args()
    listings = {f"before ({args.before})": listing_at(args.before), "this tree": listing_of(ROOT)}
    if args.listing:
        print_listings(listings)
        return
    over_the_wire, figures = asyncio.run(measure(args.url, args.key, args.memories))
    print_listings({**listings, "this tree, over /mcp": over_the_wire})
    print()
    print(f"{'call':<36} {'results':>7} {'chars':>7} {'chars/result':>12}")
    for name, row in figures.items():
        print(
            f"{name:<36} {row['results']:>7.0f} {row['chars']:>7.0f} "
            f"{row['chars_per_result']:>12.0f}"
        )


if __name__ == "__main__":
    main()
