"""The events besides a memory's versions, through the real API to a real receiver on loopback,
each queued in the transaction of its change: `message.processed` after the memory events of
its message, `batch_job.done` after the memories of its job (or failed, with none), and
`memory.expired` when the reaper removes a memory (no content). A subscription receives the
types it chose and no others. (`user.erased`: tests/webhooks/test_webhooks_api.py.)"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.webhooks.events import EVENT_TYPES
from tests.conftest import InProcessApi, wait_until
from tests.factories import (
    finished_batch_job,
    queued_batch_job,
    running_batch_worker,
    spoil_batch_job,
)
from tests.ingest.helpers import wait_job
from tests.webhooks.helpers import Receiver, memories_path, signed_by, subscribe


async def _arrived(receiver: Receiver, count: int, *types: str) -> list[dict[str, Any]]:
    """The first `count` accepted events (of `types`), once that many have arrived."""

    async def enough() -> list[dict[str, Any]]:
        got = receiver.accepted(*types)
        return got if len(got) >= count else []

    return (await wait_until(enough, timeout=60))[:count]


async def test_every_event_type_can_be_chosen(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None
) -> None:
    everything = await subscribe(tenant, receiver.url)
    assert everything["event_types"] == list(EVENT_TYPES)
    chosen = await subscribe(
        tenant, receiver.url, event_types=["user.erased", "memory.expired", "user.erased"]
    )
    assert chosen["event_types"] == ["memory.expired", "user.erased"]
    listed = {h["id"]: h["event_types"] for h in (await tenant.get("/v1/webhooks")).json()["items"]}
    assert listed == {
        everything["id"]: list(EVENT_TYPES),
        chosen["id"]: ["memory.expired", "user.erased"],
    }


async def test_a_processed_message_follows_the_memories_it_made(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None, ingest_worker: None
) -> None:
    hook = await subscribe(
        tenant, receiver.url, event_types=["memory.created", "message.processed"]
    )
    user = f"ingested-{uuid.uuid4().hex[:8]}"
    sent = await tenant.post(
        f"/v1/users/{user}/messages",
        json={
            "messages": [
                {"content": "I am allergic to peanuts"},
                {"content": "I play the cello every Sunday morning"},
            ]
        },
    )
    assert sent.status_code == 202, sent.text
    job = await wait_job(tenant, user, sent.json()["job_id"])
    assert job["state"] == "done", job
    made = [
        [d["memory_id"] for d in m["decisions"] if d["operation"] == "ADD"] for m in job["messages"]
    ]
    assert all(made), job  # each message made a memory: there is an order to check
    expected = sum(len(ids) for ids in made) + len(job["messages"])
    events = await _arrived(receiver, expected)
    assert all(signed_by(e, hook["secret"]) for e in events)
    assert len({e["id"] for e in events}) == expected
    types = [e["type"] for e in events]
    processed = [e for e in events if e["type"] == "message.processed"]
    # In the order the messages were sent, each after every memory its message made.
    assert [e["data"]["message_id"] for e in processed] == [
        m["message_id"] for m in job["messages"]
    ]
    for message, ids, event in zip(job["messages"], made, processed, strict=True):
        position = events.index(event)
        created_before = {
            e["data"]["version_id"] for e in events[:position] if e["type"] == "memory.created"
        }
        assert set(ids) <= created_before, types
        data = event["data"]
        assert (data["user_id"], data["job_id"], data["status"], data["error"]) == (
            user,
            job["job_id"],
            "done",
            None,
        )
        operations = Counter(d["operation"] for d in message["decisions"])
        assert data["operations"] == {
            op: operations[op] for op in ("ADD", "UPDATE", "DELETE", "NONE")
        }
        assert [(d["operation"], d["version_id"]) for d in data["decisions"]] == [
            (d["operation"], d["memory_id"]) for d in message["decisions"]
        ]
        # The decisions summary carries no content: the memory events do.
        assert b"peanuts" not in event["_body"] and b"cello" not in event["_body"]
    # Once each: nothing more comes for this job.
    more = await tenant.post(memories_path(user), json={"content": "a marker after the job"})
    assert more.status_code == 201, more.text
    await _arrived(receiver, expected + 1)
    assert Counter(e["type"] for e in receiver.accepted())["message.processed"] == len(processed)


async def test_a_batch_job_reports_done_after_its_memories_or_failed_with_none(
    tenant: httpx.AsyncClient,
    receiver: Receiver,
    allow_private: None,
    slow_estimate: None,
    inprocess_api: InProcessApi,
    owner: AsyncEngine,
) -> None:
    hook = await subscribe(tenant, receiver.url, event_types=["memory.created", "batch_job.done"])
    done_user, failed_user = f"job-{uuid.uuid4().hex[:8]}", f"spoilt-{uuid.uuid4().hex[:8]}"
    accepted = (await queued_batch_job(tenant, done_user, "hooked")).json()
    spoilt = (await queued_batch_job(tenant, failed_user, "spoilt")).json()
    await spoil_batch_job(owner, spoilt["job_id"], 3)
    assert receiver.received == []  # nothing is written, so nothing is sent, before the jobs run
    async with running_batch_worker(inprocess_api.app.state.runtime):
        done = await finished_batch_job(
            tenant, f"{memories_path(done_user)}/batch/jobs/{accepted['job_id']}", within_s=300
        )
        failed = await finished_batch_job(
            tenant, f"{memories_path(failed_user)}/batch/jobs/{spoilt['job_id']}", within_s=300
        )
    assert (done["status"], failed["status"]) == ("done", "failed")
    written = [m["id"] for m in done["items"]]

    events = await _arrived(receiver, len(written) + 2)
    assert all(signed_by(e, hook["secret"]) for e in events)
    mine = [e for e in events if e["data"]["user_id"] == done_user]
    # The memories in batch order, then the job that wrote them.
    assert [e["type"] for e in mine] == ["memory.created"] * len(written) + ["batch_job.done"]
    assert [e["data"]["memory_id"] for e in mine[:-1]] == written
    report = mine[-1]["data"]
    assert (report["job_id"], report["status"], report["memories"], report["error"]) == (
        accepted["job_id"],
        "done",
        len(written),
        None,
    )
    assert report["memory_ids"] == written
    assert report["finished_at"] is not None
    # The spoilt job wrote nothing: its one event says it failed, and why.
    (spoilt_event,) = [e for e in events if e["data"]["user_id"] == failed_user]
    assert spoilt_event["type"] == "batch_job.done"
    report = spoilt_event["data"]
    assert (report["job_id"], report["status"], report["memory_ids"]) == (
        spoilt["job_id"],
        "failed",
        [],
    )
    assert report["error"] == failed["error"]


async def test_an_expired_memory_is_reported_when_the_reaper_removes_it(
    tenant: httpx.AsyncClient,
    receiver: Receiver,
    allow_private: None,
    inprocess_api: InProcessApi,
    owner: AsyncEngine,
) -> None:
    hook = await subscribe(tenant, receiver.url, event_types=["memory.expired"])
    user = f"expiring-{uuid.uuid4().hex[:8]}"
    fading = await tenant.post(
        memories_path(user), json={"content": "A short-lived confidence", "ttl_s": 3600}
    )
    assert fading.status_code == 201, fading.text
    memory = fading.json()
    updated = await tenant.patch(
        f"{memories_path(user)}/{memory['id']}", json={"content": "A short-lived secret"}
    )
    assert updated.status_code == 200, updated.text
    stays = await tenant.post(memories_path(user), json={"content": "A lasting fact"})
    assert stays.status_code == 201, stays.text
    # Its time runs out (moved to the past, as time passing would), and the reaper runs, as
    # the relay's process would every COGNIS_EXPIRY_REAP_INTERVAL_S.
    async with owner.begin() as connection:
        moved = await connection.execute(
            text(
                "UPDATE memories SET expires_at = now() - interval '1 second' "
                "WHERE chain_id = CAST(:c AS uuid)"
            ),
            {"c": memory["id"]},
        )
        assert moved.rowcount == 2
    await inprocess_api.app.state.runtime.reaper.reap_due()

    (event,) = await _arrived(receiver, 1)
    assert signed_by(event, hook["secret"])
    assert event["type"] == "memory.expired"
    data = event["data"]
    assert (data["user_id"], data["memory_id"], data["versions"]) == (user, memory["id"], 2)
    assert data["expires_at"] is not None
    # No content: the memory is gone, and its event does not keep it.
    assert b"short-lived" not in event["_body"]
    # The subscription chose memory.expired only: the writes before it queued nothing for it.
    log = (await tenant.get(f"/v1/webhooks/{hook['id']}/deliveries")).json()["items"]
    assert [(d["type"], d["status"]) for d in log] == [("memory.expired", "delivered")]
    assert [r["status"] for r in receiver.received] == [200]
    gone = await tenant.get(f"{memories_path(user)}/{memory['id']}")
    assert gone.status_code == 404


@pytest.mark.parametrize("kind", ["message.processed", "batch_job.done"])
async def test_a_subscription_to_one_type_gets_no_memory_events(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None, kind: str
) -> None:
    hook = await subscribe(tenant, receiver.url, event_types=[kind])
    user = f"quiet-{uuid.uuid4().hex[:8]}"
    created = await tenant.post(memories_path(user), json={"content": "Nothing to report"})
    assert created.status_code == 201, created.text
    deleted = await tenant.delete(f"{memories_path(user)}/{created.json()['id']}")
    assert deleted.status_code == 200, deleted.text
    log = (await tenant.get(f"/v1/webhooks/{hook['id']}/deliveries")).json()["items"]
    assert log == []
