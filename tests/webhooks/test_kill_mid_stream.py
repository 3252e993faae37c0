"""Kill it mid-stream: while a stream of events is being delivered, the receiver is killed
(SIGKILL) and started again on its port, then the dispatcher's own process (`python -m app
relay`) is killed and another started. Every event arrives (0 lost), each user's in the order of
its changes; delivery is at least once, so an event the receiver had recorded but not yet
answered, or answered to a dispatcher that died before recording it, arrives again: with the
same event id and the same body, a receiver's key to de-duplicate on."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.webhooks.signing import verify
from bench import as_client
from bench.ports import free_port
from bench.webhook_receiver import read_log
from tests.conftest import ROOT, InProcessApi, ServiceProcess, only_running, wait_until
from tests.factories import running_batch_worker
from tests.webhooks.helpers import memories_path, subscribe

USERS = 4
BATCHES = 3
PER_BATCH = 15
TOTAL = USERS * BATCHES * PER_BATCH
# The receiver takes this long to answer each POST: the stream lasts seconds, so the kills
# land in it, and a killed dispatcher has POSTs in flight.
RECEIVER_DELAY_MS = 40
CONTENT = re.compile(r"^(?P<user>\S+) fact #(?P<n>\d+)$")


class ReceiverProcess:
    """bench/webhook_receiver.py in a process of its own, so that it can be SIGKILLed."""

    def __init__(self, port: int, log: Path) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.webhook_receiver",
                "--port",
                str(port),
                "--log",
                str(log),
                "--delay-ms",
                str(RECEIVER_DELAY_MS),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        self.port = port

    async def listening(self) -> None:
        async def accepts() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                assert self.process.poll() is None, "the receiver exited"
                return False

        await wait_until(accepts, timeout=30, interval=0.05)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def relay_env(migrated: dict[str, str]) -> dict[str, str]:
    """A relay process of this test's: retries soon and never gives up within the test, so a
    receiver away for seconds costs retries, never a dead letter."""
    return {
        **migrated,
        "COGNIS_WEBHOOK_MAX_ATTEMPTS": "1000",
        "COGNIS_WEBHOOK_BACKOFF_BASE_S": "0.05",
        "COGNIS_RELAY_BACKOFF_MAX_S": "0.5",
        "COGNIS_WEBHOOK_TIMEOUT_S": "5",
        "COGNIS_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver is on loopback
    }


def _events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return read_log(str(log))


async def _until_received(log: Path, count: int, timeout: float = 180) -> int:  # noqa: ASYNC109
    """Until `count` distinct events are in the receiver's log; how many there are."""

    async def enough() -> int:
        distinct = len({e["webhook-id"] for e in _events(log)})
        return distinct if distinct >= count else 0

    return int(await wait_until(enough, timeout=timeout, interval=0.05))


async def test_kill_the_receiver_then_the_dispatcher_mid_stream_nothing_is_lost(
    tenant: httpx.AsyncClient,
    allow_private: None,
    inprocess_api: InProcessApi,
    relay_env: dict[str, str],
    tmp_path: Path,
) -> None:
    users = [f"stream-{n}-{os.urandom(3).hex()}" for n in range(USERS)]
    # The memories first, numbered per user; the stream is their deletes (no model work, so
    # the stream runs at the pace of the API and the dispatcher, whatever else the machine
    # does), one user's in order, the users side by side.
    ids: dict[str, list[str]] = {}
    async with running_batch_worker(inprocess_api.app.state.runtime):  # should one be a 202
        for user in users:
            memories = [{"content": f"{user} fact #{n:03}"} for n in range(BATCHES * PER_BATCH)]
            ids[user] = [m["id"] for m in await as_client.post_batch(tenant, user, memories)]
    port, log = free_port(), tmp_path / "received.jsonl"
    receiver = ReceiverProcess(port, log)
    relays: list[ServiceProcess] = []
    try:
        await receiver.listening()
        hook = await subscribe(
            tenant, f"http://127.0.0.1:{port}/hook", event_types=["memory.deleted"]
        )
        relays.append(ServiceProcess(relay_env, "relay-webhooks-kill", "relay"))

        async def delete(batch: int) -> None:
            """The next PER_BATCH memories of each user, deleted in order."""

            async def one(user: str) -> None:
                for memory_id in ids[user][batch * PER_BATCH : (batch + 1) * PER_BATCH]:
                    deleted = await tenant.delete(f"{memories_path(user)}/{memory_id}")
                    assert deleted.status_code == 200, deleted.text

            await asyncio.gather(*(one(user) for user in users))

        # The session's relay frozen: this test's relay (and its successor) dispatch alone.
        with only_running(relays[0]):
            await delete(0)
            await _until_received(log, 10)
            receiver.kill()
            down_at = len({e["webhook-id"] for e in _events(log)})
            assert down_at < USERS * PER_BATCH  # killed mid-stream: the first part in flight
            await delete(1)  # while the receiver is away: refused connections, retried
            await asyncio.sleep(1.0)
            receiver = ReceiverProcess(port, log)
            await receiver.listening()
            await delete(2)
            await _until_received(log, down_at + 20)
            # Mid-stream again, POSTs in flight: the dispatcher's process dies without a word.
            relays[0].process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(relays[0].process.wait)
            killed_at = len({e["webhook-id"] for e in _events(log)})
            assert killed_at < TOTAL
            relays.append(ServiceProcess(relay_env, "relay-webhooks-kill-again", "relay"))
            started = time.monotonic()
            await _until_received(log, TOTAL)
            resumed_s = time.monotonic() - started

        # 0 lost: every event queued for the subscription arrived, and each is delivered once
        # the last answers (recorded before they were sent) are recorded by the dispatcher.
        async def all_delivered() -> list[dict[str, Any]]:
            path = f"/v1/webhooks/{hook['id']}/deliveries"
            items = (await tenant.get(path, params={"limit": 200})).json()["items"]
            return items if {d["status"] for d in items} == {"delivered"} else []

        log_items = await wait_until(all_delivered, timeout=60)
        assert len(log_items) == TOTAL
        events = _events(log)
        assert {e["webhook-id"] for e in events} == {d["event_id"] for d in log_items}
        # Each signed; a repeat is the same event: same id, same body.
        bodies: dict[str, str] = {}
        for event in events:
            assert verify(
                hook["secret"],
                event["webhook-id"],
                int(event["webhook-timestamp"]),
                event["body"].encode(),
                event["webhook-signature"],
            )
            assert bodies.setdefault(event["webhook-id"], event["body"]) == event["body"]
        # Per user, in order: the numbers never go back, even counting the repeats, and with
        # the repeats dropped (by event id) they are every number once, in order.
        received: dict[str, list[int]] = defaultdict(list)
        seen: dict[str, list[int]] = defaultdict(list)
        first_time: set[str] = set()
        for event in events:
            body = json.loads(event["body"])
            assert body["type"] == "memory.deleted"
            match = CONTENT.match(body["data"]["content"])
            assert match and match["user"] in users, body
            received[match["user"]].append(int(match["n"]))
            if event["webhook-id"] not in first_time:
                first_time.add(event["webhook-id"])
                seen[match["user"]].append(int(match["n"]))
        for user in users:
            assert received[user] == sorted(received[user]), user
            assert seen[user] == list(range(BATCHES * PER_BATCH)), user
        repeats = Counter(e["webhook-id"] for e in events)
        print(
            f"{TOTAL} events, {len(events) - TOTAL} repeats "
            f"({sum(1 for c in repeats.values() if c > 1)} events sent more than once); "
            f"the rest delivered {resumed_s:.1f} s after the dispatcher was replaced"
        )
    finally:
        receiver.kill()
        for relay in relays:
            relay.stop()
