"""Retries that never duplicate: writes whose answers time out, retried until they succeed.

For each door (plain REST with an Idempotency-Key, the Python client, the MCP tools over stdio)
and each kind of write (a single memory, a batch, a message, a PATCH, a DELETE), `--writes`
logical writes are sent with a timeout short enough that about half of the first attempts time
out: the timeout is the median latency of `--calibration` untimed writes of that kind, times
`--timeout-factor`. Each write is retried, with the key it was first sent with, until it
succeeds. Then the database is counted: exactly `--writes` memories (one per logical create,
`--batch` per batch, one message and its memory per message), one new version per PATCH, one
ended chain per DELETE. A write sent again without its key is the contrast (`--contrast`): the
same loop for single memories through REST without a key, which duplicates.

Its own API process (the bench's admin key, a tenant of its own, no LLM: each message is stored
as it is); the users are erased at the end. Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from cognis_client import AsyncCognisClient, CognisError, RetryPolicy, new_idempotency_key
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy.engine import make_url

from bench.mixed_traffic import create_tenant, start_admin_api

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("memory", "batch", "message", "patch", "delete")
KEY_IN_ERROR = re.compile(r"idempotency_key='([^']+)'")


@dataclass
class Outcome:
    """One door and kind: what the writes went through, and what the database holds after."""

    door: str
    kind: str
    timeout_s: float
    writes: int = 0
    attempts: int = 0
    lost: int = 0  # attempts that got no answer in time (or, through MCP, an error to retry)
    expected: int = 0
    found: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return max(self.found - self.expected, 0)

    @property
    def missing(self) -> int:
        return max(self.expected - self.found, 0)


# One logical write: (attempt timeout s, idempotency key or None, token) -> sends one attempt.
# It returns normally when the write succeeded and raises `Lost` when it must be sent again.
Attempt = Callable[[float, str | None, str], Awaitable[None]]


class Lost(Exception):
    """The attempt got no answer (or a retryable one): send it again with the same key."""


@dataclass
class Bench:
    url: str
    key: str
    tenant_id: str
    db: asyncpg.Pool
    users: list[str]
    targets: dict[str, list[str]] = field(default_factory=dict)  # user -> memory ids to change

    def user(self, door: str, kind: str) -> str:
        user = f"bench-retry-{door}-{kind}-{uuid.uuid4().hex[:6]}"
        self.users.append(user)
        return user

    async def seed(self, user: str, count: int) -> list[str]:
        """`count` memories for PATCH and DELETE to work on (long timeout, no retries needed)."""
        async with httpx.AsyncClient(base_url=self.url, headers=self._headers(), timeout=300) as h:
            ids: list[str] = []
            for start in range(0, count, 100):
                batch = [
                    {"content": f"seed {i} of {user}", "category": "preferences"}
                    for i in range(start, min(start + 100, count))
                ]
                answer = await h.post(f"/v1/users/{user}/memories/batch", json={"memories": batch})
                answer.raise_for_status()
                ids += [m["id"] for m in answer.json()["items"]]
        return ids

    def _headers(self) -> dict[str, str]:
        return {"X-API-Key": self.key}

    async def count(self, kind: str, user: str, tokens: list[str], batch: int) -> tuple[int, int]:
        """(expected, found) rows for the writes with these tokens."""
        async with self.db.acquire() as conn, conn.transaction():
            await conn.execute("SELECT set_config('cognis.tenant_id', $1, true)", self.tenant_id)
            if kind in ("memory", "batch", "message"):
                found = await conn.fetchval(
                    "SELECT count(*) FROM memories WHERE user_id = $1 AND is_current "
                    "AND split_part(content, ' ', 1) = ANY($2::text[])",
                    user,
                    tokens,
                )
                if kind == "message":
                    found += await conn.fetchval(
                        "SELECT count(*) FROM messages WHERE user_id = $1 "
                        "AND split_part(content, ' ', 1) = ANY($2::text[])",
                        user,
                        tokens,
                    )
                    return 2 * len(tokens), found
                return len(tokens) * (batch if kind == "batch" else 1), found
            if kind == "patch":  # every seeded chain: exactly one version more
                found = await conn.fetchval(
                    "SELECT count(*) FROM memories WHERE user_id = $1 AND version > 1", user
                )
                return len(tokens), found
            # delete: every seeded chain ended once (no current row), none rewritten
            ended = await conn.fetchval(
                "SELECT count(DISTINCT chain_id) FROM memories m WHERE user_id = $1 AND NOT "
                "EXISTS (SELECT 1 FROM memories c WHERE c.chain_id = m.chain_id AND c.is_current)",
                user,
            )
            extra = await conn.fetchval(
                "SELECT count(*) FROM memories WHERE user_id = $1 AND version > 1", user
            )
            return len(tokens), ended + extra


def _body(kind: str, token: str, batch: int) -> dict[str, Any]:
    if kind == "memory":
        return {"content": f"{token} likes retry benches", "category": "preferences"}
    if kind == "batch":
        return {
            "memories": [
                {"content": f"{token} item {i} of a batch", "category": "preferences"}
                for i in range(batch)
            ]
        }
    if kind == "message":
        return {"messages": [{"content": f"{token} I have started learning the cello"}]}
    return {"content": f"{token} changed its mind about benches"}


def rest_attempts(bench: Bench, user: str, kind: str, batch: int) -> Attempt:
    """Plain HTTP, as any client in any language would send it."""
    paths = {
        "memory": ("POST", f"/v1/users/{user}/memories"),
        "batch": ("POST", f"/v1/users/{user}/memories/batch"),
        "message": ("POST", f"/v1/users/{user}/messages"),
    }
    targets = bench.targets.get(user, [])

    async def attempt(timeout_s: float, key: str | None, token: str) -> None:
        if kind in paths:
            method, path = paths[kind]
        else:
            method = "PATCH" if kind == "patch" else "DELETE"
            path = f"/v1/users/{user}/memories/{targets[int(token.split('-')[-1])]}"
        headers = {"X-API-Key": bench.key} | ({"Idempotency-Key": key} if key else {})
        body = None if kind == "delete" else _body(kind, token, batch)
        async with httpx.AsyncClient(base_url=bench.url, timeout=timeout_s) as http:
            try:
                answer = await http.request(method, path, json=body, headers=headers)
            except httpx.TimeoutException as exc:
                raise Lost from exc
        if answer.status_code == 503 or (
            answer.status_code == 409 and answer.json().get("code") == "idempotency_key_in_use"
        ):
            raise Lost
        if answer.status_code in (404, 409) and kind == "delete" and key is None:
            return  # already ended by the attempt that timed out
        answer.raise_for_status()

    return attempt


def client_attempts(
    bench: Bench, user: str, kind: str, batch: int, lost: list[Exception] | None = None
) -> Attempt:
    """The Python client, with its own retries of lost answers (same key) left on: each of
    those is appended to `lost`."""
    targets = bench.targets.get(user, [])

    def on_retry(attempt: int, delay_s: float, error: Exception) -> None:
        if lost is not None:
            lost.append(error)

    async def attempt(timeout_s: float, key: str | None, token: str) -> None:
        async with AsyncCognisClient(
            bench.url,
            api_key=bench.key,
            timeout_s=timeout_s,
            retry=RetryPolicy(max_retries=2),
            on_retry=on_retry,
        ) as cognis:
            try:
                if kind == "memory":
                    await cognis.add_memory(user, _body(kind, token, batch), idempotency_key=key)
                elif kind == "batch":
                    body = _body(kind, token, batch)["memories"]
                    await cognis.add_memories(user, body, idempotency_key=key)
                elif kind == "message":
                    messages = _body(kind, token, batch)["messages"]
                    await cognis.add_messages(user, messages, idempotency_key=key)
                else:
                    target = targets[int(token.split("-")[-1])]
                    if kind == "patch":
                        content = _body(kind, token, batch)["content"]
                        await cognis.update_memory(
                            user, target, idempotency_key=key, content=content
                        )
                    else:
                        await cognis.delete_memory(user, target, idempotency_key=key)
            except (httpx.TransportError, CognisError) as exc:
                if isinstance(exc, CognisError) and exc.status < 500 and exc.status != 409:
                    raise
                raise Lost from exc

    return attempt


@contextlib.asynccontextmanager
async def mcp_session(bench: Bench, user: str, timeout_s: float) -> AsyncIterator[ClientSession]:
    """`python -m app mcp` over stdio, as Claude Desktop starts it, for one user."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env.update(
        COGNIS_MCP_API_URL=bench.url,
        COGNIS_MCP_API_KEY=bench.key,
        COGNIS_MCP_USER_ID=user,
        COGNIS_MCP_TIMEOUT_S=f"{timeout_s:.3f}",
    )
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "app", "mcp"], env=env, cwd=str(ROOT)
    )
    log = (ROOT / ".local" / "logs" / "bench-retry-mcp.log").open("a")  # the server's stderr
    try:
        async with (
            stdio_client(server, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        log.close()


def mcp_attempts(session: ClientSession, targets: list[str], kind: str) -> Attempt:
    """The MCP tools, as an agent calls them: a failed write is called again with the key its
    error named (the tools have no batch; `batch` is not a kind here)."""
    keys: dict[str, str] = {}

    async def attempt(timeout_s: float, key: str | None, token: str) -> None:
        arguments: dict[str, Any]
        if kind == "memory":
            tool, arguments = "add_memory", {"content": _body(kind, token, 1)["content"]}
        elif kind == "message":
            content = _body(kind, token, 1)["messages"][0]["content"]
            tool, arguments = "add_messages", {"messages": [{"content": content}], "wait": False}
        else:
            target = targets[int(token.split("-")[-1])]
            tool, arguments = (
                f"{'update' if kind == 'patch' else 'delete'}_memory",
                {"memory_id": target},
            )
            if kind == "patch":
                arguments["content"] = _body(kind, token, 1)["content"]
        if token in keys:
            arguments["idempotency_key"] = keys[token]
        result = await session.call_tool(tool, arguments)
        if result.isError:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            found = KEY_IN_ERROR.search(text)
            if found is None:
                raise RuntimeError(f"{tool} failed without a key to retry with: {text[:300]}")
            keys[token] = found.group(1)
            raise Lost

    return attempt


async def drive(attempt: Attempt, outcome: Outcome, tokens: list[str], *, keyed: bool) -> None:
    """Each logical write until it succeeds, one after another (an agent's own retries)."""
    for token in tokens:
        key = new_idempotency_key() if keyed else None
        outcome.writes += 1
        for tries in range(1, 50):
            outcome.attempts += 1
            try:
                await attempt(outcome.timeout_s, key, token)
                break
            except Lost:
                outcome.lost += 1
                await asyncio.sleep(min(0.05 * tries, 1.0))
        else:
            outcome.notes.append(f"{token}: gave up after 50 attempts")


async def calibrate(attempt: Attempt, kind: str, samples: int) -> float:
    """Median seconds of untimed writes of this kind: the timeout that loses about half."""
    seconds: list[float] = []
    for i in range(samples):
        started = time.perf_counter()
        await attempt(600, new_idempotency_key(), f"calib{kind}{uuid.uuid4().hex[:6]}-{i}")
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


async def settle(bench: Bench, user: str, timeout_s: float = 300) -> None:
    """Wait until every message of `user` has been applied (its task done)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        async with bench.db.acquire() as conn, conn.transaction():
            await conn.execute("SELECT set_config('cognis.tenant_id', $1, true)", bench.tenant_id)
            pending = await conn.fetchval(
                "SELECT count(*) FROM ingest_tasks t JOIN messages m ON m.id = t.message_id "
                "WHERE m.user_id = $1",
                user,
            )
        if not pending:
            return
        await asyncio.sleep(0.5)


async def run_door(bench: Bench, door: str, kind: str, args: argparse.Namespace) -> Outcome:
    user = bench.user(door, kind)
    tokens = [f"t{uuid.uuid4().hex[:8]}-{i}" for i in range(args.writes)]
    calibration_user = bench.user(door, f"{kind}-calibration")
    if kind in ("patch", "delete"):
        bench.targets[user] = await bench.seed(user, args.writes)
        bench.targets[calibration_user] = await bench.seed(calibration_user, args.calibration)

    if door == "mcp":
        async with mcp_session(bench, calibration_user, 600) as session:
            calibrate_with = mcp_attempts(session, bench.targets.get(calibration_user, []), kind)
            timeout_s = await calibrate(calibrate_with, kind, args.calibration)
        timeout_s *= args.timeout_factor
        outcome = Outcome(door, kind, timeout_s)
        async with mcp_session(bench, user, timeout_s) as session:
            await drive(
                mcp_attempts(
                    session, bench.targets[user] if kind in ("patch", "delete") else [], kind
                ),
                outcome,
                tokens,
                keyed=True,
            )
    else:
        make = rest_attempts if door.startswith("rest") else client_attempts
        timeout_s = (
            await calibrate(make(bench, calibration_user, kind, args.batch), kind, args.calibration)
            * args.timeout_factor
        )
        outcome = Outcome(door, kind, timeout_s)
        inside: list[Exception] = []  # the client's own retries
        attempt = (
            rest_attempts(bench, user, kind, args.batch)
            if door.startswith("rest")
            else client_attempts(bench, user, kind, args.batch, inside)
        )
        await drive(attempt, outcome, tokens, keyed=door != "rest-without-key")
        outcome.attempts += len(inside)
        outcome.lost += len(inside)
    if kind == "message":
        await settle(bench, user)
    outcome.expected, outcome.found = await bench.count(kind, user, tokens, args.batch)
    return outcome


def _report(outcomes: list[Outcome]) -> None:
    print(
        f"\n{'door':<17} {'kind':<8} {'timeout':>8} {'writes':>6} {'attempts':>8} "
        f"{'lost':>5} {'expected':>8} {'found':>6} {'dup':>4} {'missing':>7}"
    )
    for o in outcomes:
        print(
            f"{o.door:<17} {o.kind:<8} {o.timeout_s * 1000:>6.0f}ms {o.writes:>6} "
            f"{o.attempts:>8} {o.lost:>5} {o.expected:>8} {o.found:>6} {o.duplicates:>4} "
            f"{o.missing:>7}" + (f"  {'; '.join(o.notes)}" if o.notes else ""),
            flush=True,
        )


async def run(args: argparse.Namespace) -> None:
    process, url, admin_key = start_admin_api("bench-retry.log")
    database = make_url(os.environ["COGNIS_DATABASE_URL"]).set(drivername="postgresql")
    db = await asyncpg.create_pool(
        database.render_as_string(hide_password=False), min_size=1, max_size=2
    )
    users: list[str] = []
    key = ""
    outcomes: list[Outcome] = []
    try:
        async with httpx.AsyncClient(
            base_url=url, headers={"X-API-Key": admin_key}, timeout=60
        ) as admin:
            name = f"bench-retry-{uuid.uuid4().hex[:6]}"
            tenant_id, key = await create_tenant(admin, name)
        bench = Bench(url, key, tenant_id, db, users)
        plan = [(door, kind) for door in args.doors for kind in args.kinds]
        if args.contrast:
            plan.append(("rest-without-key", "memory"))
        for door, kind in plan:
            if door == "mcp" and kind == "batch":
                continue  # no batch tool
            outcome = await run_door(bench, door, kind, args)
            outcomes.append(outcome)
            print(
                f"{door} {kind}: {outcome.writes} writes, {outcome.lost} of "
                f"{outcome.attempts} attempts lost at {outcome.timeout_s * 1000:.0f} ms, "
                f"{outcome.duplicates} duplicates, {outcome.missing} missing",
                flush=True,
            )
        _report(outcomes)
    finally:
        async with httpx.AsyncClient(base_url=url, timeout=600) as http:
            for user in users:
                await http.delete(f"/v1/users/{user}", headers={"X-API-Key": key})
        await db.close()
        process.terminate()
        process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=40, help="logical writes per door and kind")
    parser.add_argument("--calibration", type=int, default=8, help="untimed writes per kind")
    parser.add_argument("--timeout-factor", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=5, help="memories per batch write")
    parser.add_argument("--doors", nargs="+", default=["rest", "client", "mcp"])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument(
        "--contrast",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also single memories through REST without a key (these do duplicate)",
    )
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
