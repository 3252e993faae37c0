"""Webhook delivery against the running service (`make up`), to a receiver on loopback
(bench/webhook_receiver.py, in this process): latency from commit to receipt, and the events/s
one relay's dispatcher delivers.

The receiver is on 127.0.0.1, so the API must allow it:

    COGNIS_WEBHOOK_ALLOW_PRIVATE=true make up && make bench-webhooks

- latency: memories written one at a time (POST, 201), the next after the event arrived, so
  the dispatcher is idle when each comes. No clock says when a transaction commits, so two
  bounds: from the transaction's start (`created_at` in the event: at or before the commit)
  and from the 201's arrival (just after it).
- events/s per relay: every current memory of U users ended in one request per user (mem0's
  `delete_all`, one transaction each, sent together): U x N `memory.deleted` events
  committed together, a backlog the dispatcher drains; events/s from the first answer (the
  first commit) to the last receipt, and each event's latency from its user's answer. One
  user's events go one at a time (in order), so the rate depends on how many users share the
  backlog: runs with 1 user and with several. `make up` runs one relay, in the API process
  (COGNIS_RELAY_IN_API).

Each measure subscribes the receiver for its own events only; its users and subscription are
deleted after it. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import httpx

from bench import as_client
from bench.foundation import summary
from bench.webhook_receiver import WebhookReceiver


def _events(receiver: WebhookReceiver, kind: str) -> dict[str, dict[str, Any]]:
    """First receipt of each event of `kind`, by event id: {id: {"received_at", "body"}}."""
    first: dict[str, dict[str, Any]] = {}
    for record in list(receiver.records):
        body = json.loads(record["body"])
        if body["type"] == kind and body["id"] not in first:
            first[body["id"]] = {"received_at": record["received_at"], "body": body}
    return first


def _latency_ms(event: dict[str, Any]) -> float:
    committed = datetime.fromisoformat(event["body"]["created_at"]).timestamp()
    return (event["received_at"] - committed) * 1000


def _wait_for(receiver: WebhookReceiver, count: int, timeout_s: float) -> bool:
    """Until the receiver has `count` records (cheap to poll: the bodies are read after)."""
    deadline = time.monotonic() + timeout_s
    while len(receiver.records) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class LoopbackRefused(Exception):
    """The API does not allow a receiver on loopback (COGNIS_WEBHOOK_ALLOW_PRIVATE)."""


@contextlib.contextmanager
def subscribed(api: httpx.Client, receiver: WebhookReceiver, kind: str) -> Iterator[None]:
    """A subscription of the receiver to `kind` for the block: each measure its own, so one
    measure's events never count in another's."""
    created = api.post("/v1/webhooks", json={"url": receiver.url, "event_types": [kind]})
    if created.status_code == 400 and "ALLOW_PRIVATE" in created.text:
        raise LoopbackRefused(created.json()["detail"])
    created.raise_for_status()
    try:
        yield
    finally:
        api.delete(f"/v1/webhooks/{created.json()['id']}")


def measure_latency(api: httpx.Client, receiver: WebhookReceiver, samples: int) -> None:
    user = f"bench-hooks-{uuid.uuid4().hex[:8]}"
    before = len(receiver.records)
    answered: dict[str, float] = {}  # version id -> when its 201 arrived
    try:
        with subscribed(api, receiver, "memory.created"):
            for n in range(samples):
                created = as_client.post_sync(
                    api, f"/v1/users/{user}/memories", json={"content": f"Latency probe {n}"}
                )
                answered[created.json()["version_id"]] = time.time()
                if not _wait_for(receiver, before + n + 1, 30):
                    print(f"  probe {n} not received within 30 s", file=sys.stderr)
        events = [
            e
            for e in _events(receiver, "memory.created").values()
            if e["body"]["data"]["version_id"] in answered
        ]
        started = [_latency_ms(e) for e in events]
        after_answer = [
            (e["received_at"] - answered[e["body"]["data"]["version_id"]]) * 1000 for e in events
        ]
        print("latency, idle dispatcher, one write at a time:")
        print(f"  from the writing transaction's start (>= from commit): {summary(started)}")
        print(f"  from the 201's arrival (<= from commit):               {summary(after_answer)}")
    finally:
        api.delete(f"/v1/users/{user}")


def measure_backlog(
    api: httpx.Client, receiver: WebhookReceiver, users: int, per_user: int
) -> None:
    names = [f"bench-hooks-{uuid.uuid4().hex[:8]}" for _ in range(users)]
    try:
        for name in names:
            for offset in range(0, per_user, 100):
                count = min(100, per_user - offset)
                batch = [{"content": f"Backlog fact {offset + i}"} for i in range(count)]
                as_client.post_batch_sync(api, name, batch)
        before = len(receiver.records)
        total = users * per_user

        def end_all(name: str) -> float:
            """One request ends every current memory of the user in one transaction; when
            its answer arrived (just after the commit)."""
            api.delete("/v1/memories", params={"user_id": name}).raise_for_status()
            return time.time()

        with subscribed(api, receiver, "memory.deleted"):
            with ThreadPoolExecutor(len(names)) as pool:  # all users at once
                committed = dict(zip(names, pool.map(end_all, names), strict=True))
            if not _wait_for(receiver, before + total, 600):
                print(f"  backlog of {total} not received within 600 s", file=sys.stderr)
        events = [
            e
            for e in _events(receiver, "memory.deleted").values()
            if e["body"]["data"]["user_id"] in names
        ]
        last_receipt = max(e["received_at"] for e in events)
        span_s = last_receipt - min(committed.values())
        # Once every user's transaction is in, the API does nothing else: the dispatcher
        # alone, draining what is left.
        drained = [e for e in events if e["received_at"] > max(committed.values())]
        drain_s = last_receipt - max(committed.values())
        print(
            f"backlog of {len(events)} events ({users} users x {per_user}), one relay: "
            f"{len(events) / span_s:.0f} events/s (first commit -> last receipt {span_s:.2f} s); "
            f"after the last commit {len(drained) / drain_s:.0f} events/s "
            f"({len(drained)} events in {drain_s:.2f} s)"
        )
        latencies = [
            (e["received_at"] - committed[e["body"]["data"]["user_id"]]) * 1000 for e in events
        ]
        print(f"  latency in that backlog, commit -> receipt: {summary(latencies)}")
    finally:
        for name in names:
            api.delete(f"/v1/users/{name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument(
        "--backlogs",
        default="1x200,10x50,40x25",
        help="comma-separated USERSxEVENTS runs of the throughput measure",
    )
    args = parser.parse_args()

    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=300)
    receiver = WebhookReceiver().start()
    try:
        measure_latency(api, receiver, args.latency_samples)
        for run in args.backlogs.split(","):
            users, per_user = (int(part) for part in run.split("x"))
            measure_backlog(api, receiver, users, per_user)
        print(f"{as_client.RETRIES.describe()} while writing the memories")
    except LoopbackRefused as exc:
        print(
            "the API refuses a receiver on loopback: start it with "
            "COGNIS_WEBHOOK_ALLOW_PRIVATE=true (make up reads COGNIS_* from the environment); "
            f"it said: {exc}",
            file=sys.stderr,
        )
        return 2
    finally:
        receiver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
