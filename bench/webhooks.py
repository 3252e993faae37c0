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

- write-path cost (`--write-rounds`): batch creates (`POST .../memories/batch`, LoCoMo turns)
  timed with a subscription to `memory.created` and without one, alternating in every round
  (with first in even rounds, without first in odd ones) on one user, so that the machine's
  swings and the user's growing history fall on both alike; texts/s of each and the ratio
  with/without, per round and over all. Between writes the bench waits for the events (with)
  and lets the relay index the batch, so that no delivery runs during a timed write. Then the
  event-queuing statement itself (the fan-out INSERT ... SELECT of app/webhooks/events.py),
  for a batch's events, run in Postgres with and without a subscription, alternating:
  `EXPLAIN ANALYZE` in a transaction rolled back, its execution and trigger time (needs the
  owner's `COGNIS_MIGRATION_DATABASE_URL` of the API's database).

Each measure subscribes the receiver for its own events only; its users and subscription are
deleted after it. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import httpx

from bench import as_client
from bench.foundation import locomo_turns_and_questions, summary
from bench.ports import free_port
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


def measure_write_cost(
    api: httpx.Client, receiver: WebhookReceiver, rounds: int, batch: int, settle_s: float
) -> None:
    """Batch create texts/s with a subscription and without, alternating in each round."""
    user = f"bench-hooks-write-{uuid.uuid4().hex[:8]}"
    turns, _ = locomo_turns_and_questions(batch * (2 * rounds + 1))
    written = 0
    seconds: dict[str, list[float]] = {"with": [], "without": []}

    def timed_batch() -> float:
        nonlocal written
        memories = [{"content": t} for t in turns[written : written + batch]]
        written += batch
        started = time.perf_counter()
        created = api.post(f"/v1/users/{user}/memories/batch", json={"memories": memories})
        elapsed = time.perf_counter() - started
        if created.status_code != 201:
            raise RuntimeError(f"batch create answered {created.status_code}: {created.text}")
        return elapsed

    try:
        timed_batch()  # warm-up: the user's first write, the model's first batch
        time.sleep(settle_s)
        for n in range(rounds):
            for setting in ("with", "without") if n % 2 == 0 else ("without", "with"):
                if setting == "with":
                    before = len(receiver.records)
                    with subscribed(api, receiver, "memory.created"):
                        seconds["with"].append(timed_batch())
                        if not _wait_for(receiver, before + batch, 120):
                            print(f"  round {n}: events not received in 120 s", file=sys.stderr)
                else:
                    seconds["without"].append(timed_batch())
                time.sleep(settle_s)  # the relay indexes the batch before the next write
            ratio = seconds["without"][-1] / seconds["with"][-1]
            print(
                f"  round {n + 1}: with {batch / seconds['with'][-1]:.2f} texts/s, without "
                f"{batch / seconds['without'][-1]:.2f} texts/s, with/without {ratio:.3f}",
                flush=True,
            )
        with_rate = batch * rounds / sum(seconds["with"])
        without_rate = batch * rounds / sum(seconds["without"])
        paired = statistics.median(
            w / o for w, o in zip(seconds["without"], seconds["with"], strict=True)
        )
        print(
            f"write-path cost, {rounds} rounds of {batch} texts: with a subscription "
            f"{with_rate:.2f} texts/s, without {without_rate:.2f} texts/s; with/without "
            f"{with_rate / without_rate:.3f} (median of the rounds' ratios {paired:.3f})"
        )
    finally:
        api.delete(f"/v1/users/{user}")


async def _fan_out_ms(owner_url: str, batch: int, samples: int) -> dict[str, list[float]]:
    """The fan-out statement's execution time (its trigger's included) in Postgres for `batch`
    events of a scratch tenant, with one subscription to their type and with none,
    alternating; each run in a transaction rolled back (nothing is queued or delivered)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from app.webhooks.events import FAN_OUT, Event, fan_out_parameters

    engine = create_async_engine(owner_url)
    tenant = uuid.uuid4()
    payload = {"content": "x" * 120, "metadata": {}, "category": "personal"}
    events = [Event("memory.created", "bench-fan-out", payload, tenant) for _ in range(batch)]
    explain = text(f"EXPLAIN (ANALYZE, FORMAT JSON) {FAN_OUT.text}")
    times: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for n in range(2 * samples):
            setting = ("with", "without")[(n + n // 2) % 2]
            async with engine.connect() as connection:
                transaction = await connection.begin()
                await connection.execute(
                    text("INSERT INTO tenants (id, name) VALUES (:t, :n)"),
                    {"t": tenant, "n": f"bench-fan-out-{tenant.hex[:8]}"},
                )
                if setting == "with":
                    await connection.execute(
                        text(
                            "INSERT INTO webhook_subscriptions (tenant_id, url, secret, "
                            "event_types) VALUES (:t, 'https://receiver.example/hook', "
                            "'whsec_bench', ARRAY['memory.created'])"
                        ),
                        {"t": tenant},
                    )
                explained = (
                    await connection.execute(explain, fan_out_parameters(events))
                ).scalar_one()
                await transaction.rollback()
            plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]
            # The execution time includes the triggers' (the NOTIFY of a queued delivery).
            times[setting].append(plan["Execution Time"])
    finally:
        await engine.dispose()
    return times


def measure_fan_out(owner_url: str, batch: int, samples: int) -> None:
    times = asyncio.run(_fan_out_ms(owner_url, batch, samples))
    print(
        f"event-queuing statement for {batch} events, in Postgres: with a subscription "
        f"{summary(times['with'])}; without {summary(times['without'])}"
    )


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
    parser.add_argument(
        "--write-rounds",
        type=int,
        default=0,
        help="rounds of the write-path cost measure (batch creates with and without a "
        "subscription); 0: not run",
    )
    parser.add_argument("--write-batch", type=int, default=50, help="texts per batch create")
    parser.add_argument(
        "--settle-s", type=float, default=2.0, help="pause after each timed batch create"
    )
    parser.add_argument(
        "--only-write-cost",
        action="store_true",
        help="skip the latency and backlog measures",
    )
    args = parser.parse_args()

    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=300)
    receiver = WebhookReceiver(port=free_port()).start()
    try:
        if not args.only_write_cost:
            measure_latency(api, receiver, args.latency_samples)
            for run in args.backlogs.split(","):
                users, per_user = (int(part) for part in run.split("x"))
                measure_backlog(api, receiver, users, per_user)
        if args.write_rounds:
            measure_write_cost(api, receiver, args.write_rounds, args.write_batch, args.settle_s)
            owner_url = os.environ.get("COGNIS_MIGRATION_DATABASE_URL")
            if owner_url:
                measure_fan_out(owner_url, args.write_batch, samples=20)
            else:
                print("no COGNIS_MIGRATION_DATABASE_URL: the statement's own time not measured")
        print(f"{as_client.RETRIES.describe()} while writing the memories")
        print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
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
