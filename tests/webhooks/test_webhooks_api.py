"""Webhooks against the real API and a real receiver on loopback: events written with the
change, delivered signed and in order by the relay process's dispatcher, retried while the
receiver fails, dead after the limit, never another tenant's; URLs into private ranges refused."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import InProcessApi, only_running, wait_until
from tests.tenants.helpers import new_tenant, tenant_client
from tests.webhooks.helpers import Receiver, memories_path, signed_by, subscribe


async def test_create_update_delete_arrive_once_each_signed_and_in_order(
    tenant: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    receiver: Receiver,
    allow_private: None,
) -> None:
    hook = await subscribe(tenant, receiver.url)
    # Another tenant's subscription, to the same receiver: it must receive nothing of ours.
    other_key = await new_tenant(admin, "hooks-other")
    other_receiver = Receiver()
    try:
        async with tenant_client(inprocess_api, other_key.key) as other:
            other_hook = await subscribe(other, other_receiver.url)
            listed = (await other.get("/v1/webhooks")).json()["items"]
            assert [h["id"] for h in listed] == [other_hook["id"]]
            assert all(h["secret"] is None for h in listed)
            assert (await other.get(f"/v1/webhooks/{hook['id']}")).status_code == 404
            assert (await other.delete(f"/v1/webhooks/{hook['id']}")).status_code == 404
        assert [h["id"] for h in (await tenant.get("/v1/webhooks")).json()["items"]] == [hook["id"]]

        user = f"hooked-{uuid.uuid4().hex[:8]}"
        created = await tenant.post(memories_path(user), json={"content": "I live in Lisbon"})
        assert created.status_code == 201, created.text
        memory_id = created.json()["id"]
        updated = await tenant.patch(
            f"{memories_path(user)}/{memory_id}", json={"content": "I live in Porto"}
        )
        assert updated.status_code == 200, updated.text
        deleted = await tenant.delete(f"{memories_path(user)}/{updated.json()['id']}")
        assert deleted.status_code == 200, deleted.text

        async def three() -> list[dict[str, Any]]:
            got = receiver.accepted()
            return got if len(got) >= 3 else []

        events = await wait_until(three)
        assert [e["type"] for e in events] == [
            "memory.created",
            "memory.updated",
            "memory.deleted",
        ]
        assert len({e["id"] for e in events}) == 3
        for event in events:
            assert signed_by(event, hook["secret"])
            assert not signed_by(event, other_hook["secret"])
            assert event["data"]["user_id"] == user
            assert event["data"]["memory_id"] == memory_id
        assert events[0]["data"]["content"] == "I live in Lisbon"
        assert events[1]["data"]["content"] == "I live in Porto"
        assert events[1]["data"]["version"] == 2
        assert events[2]["data"]["superseded_at"] is not None

        log = (await tenant.get(f"/v1/webhooks/{hook['id']}/deliveries")).json()["items"]
        assert [d["status"] for d in log] == ["delivered"] * 3
        assert all(d["log"][0]["status_code"] == 200 for d in log)
        # Nothing more arrives (once each), and nothing at all at the other tenant's receiver.
        more = await tenant.post(memories_path(user), json={"content": "A marker after the three"})
        assert more.status_code == 201

        async def marker() -> bool:
            return len(receiver.accepted()) >= 4

        await wait_until(marker)
        assert [e["type"] for e in receiver.accepted()] == [
            "memory.created",
            "memory.updated",
            "memory.deleted",
            "memory.created",
        ]
        assert other_receiver.received == []
    finally:
        other_receiver.close()


async def test_a_failing_receiver_gets_every_event_in_order_once_it_is_back(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None
) -> None:
    hook = await subscribe(tenant, receiver.url)
    # Two failures, fewer than COGNIS_WEBHOOK_MAX_ATTEMPTS=3: the first event is retried.
    receiver.fail_next = 2
    user = f"retried-{uuid.uuid4().hex[:8]}"
    contents = [f"fact number {n}" for n in range(4)]
    batch = await tenant.post(
        f"{memories_path(user)}/batch", json={"memories": [{"content": c} for c in contents]}
    )
    assert batch.status_code == 201, batch.text

    async def all_four() -> list[dict[str, Any]]:
        got = receiver.accepted()
        return got if len(got) >= 4 else []

    events = await wait_until(all_four)
    assert [e["data"]["content"] for e in events] == contents
    # Nothing of the user overtook the failing first event: the first three requests were it.
    sent = [json.loads(r["body"])["data"]["content"] for r in receiver.received]
    assert sent == [contents[0], contents[0], *contents]
    log = (await tenant.get(f"/v1/webhooks/{hook['id']}/deliveries")).json()["items"]
    first = log[-1]
    assert first["status"] == "delivered"
    assert [a["status_code"] for a in first["log"]] == [500, 500, 200]
    assert first["log"][0]["error"] == "HTTP 500"
    assert first["log"][-1]["error"] is None


async def test_a_dead_letter_after_the_limit_then_redelivered_on_request(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None
) -> None:
    hook = await subscribe(tenant, receiver.url)
    receiver.status = 503
    user = f"dead-{uuid.uuid4().hex[:8]}"
    created = await tenant.post(memories_path(user), json={"content": "never heard"})
    assert created.status_code == 201, created.text
    deliveries = f"/v1/webhooks/{hook['id']}/deliveries"

    async def dead() -> list[dict[str, Any]]:
        items = (await tenant.get(deliveries)).json()["items"]
        return items if items and items[0]["status"] == "dead" else []

    (delivery,) = await wait_until(dead)
    # COGNIS_WEBHOOK_MAX_ATTEMPTS=3 in the tests' environment.
    assert delivery["attempts"] == 3
    assert [a["status_code"] for a in delivery["log"]] == [503, 503, 503]
    receiver.status = 200
    again = await tenant.post(f"{deliveries}/{delivery['id']}/redeliver")
    assert again.status_code == 202, again.text

    async def arrived() -> list[dict[str, Any]]:
        return receiver.accepted()

    (event,) = await wait_until(arrived)
    assert event["id"] == delivery["event_id"]
    missing = await tenant.post(
        f"/v1/webhooks/{uuid.uuid4()}/deliveries/{delivery['id']}/redeliver"
    )
    assert missing.status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9000/hook",
        "http://0.0.0.0/hook",
        "http://localhost/hook",
        # Not global although neither loopback nor private to older checks (issue 54).
        "http://100.100.100.200/latest/meta-data/",
        "http://100.64.0.1/hook",
        "http://[2002:7f00:1::]/hook",
        "http://192.0.0.192/hook",
        "http://[fec0::1]/hook",
        "http://[64:ff9b::a00:1]/hook",
        "http://[::ffff:10.0.0.1]/hook",
    ],
)
async def test_private_addresses_are_refused_unless_allowed(
    tenant: httpx.AsyncClient, url: str
) -> None:
    refused = await tenant.post("/v1/webhooks", json={"url": url})
    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert "COGNIS_WEBHOOK_ALLOW_PRIVATE" in refused.json()["detail"]
    assert (await tenant.get("/v1/webhooks")).json()["items"] == []


async def test_bad_subscriptions_are_refused_with_a_reason(tenant: httpx.AsyncClient) -> None:
    for body, words in (
        ({"url": "ftp://example.com/x"}, "http or https"),
        ({"url": "https://example.com:99999/x"}, "cannot be parsed"),
        ({"url": "https://example.com:0/x"}, "between 1 and 65535"),
        ({"url": "http://[::1/x"}, "cannot be parsed"),
        ({"url": "https://example.com/x", "event_types": ["memory.exploded"]}, "choose among"),
    ):
        refused = await tenant.post("/v1/webhooks", json=body)
        assert refused.status_code == 400, refused.text
        assert words in refused.json()["detail"]


async def test_a_delivery_id_beyond_bigint_is_not_found(tenant: httpx.AsyncClient) -> None:
    for delivery_id in (2**63, 2**64 + 1):
        path = f"/v1/webhooks/{uuid.uuid4()}/deliveries/{delivery_id}/redeliver"
        missing = await tenant.post(path)
        assert missing.status_code == 404, missing.text
        assert missing.headers["content-type"].startswith("application/problem+json")


async def test_a_port_out_of_range_is_refused_even_where_private_receivers_are_allowed(
    tenant: httpx.AsyncClient, allow_private: None
) -> None:
    refused = await tenant.post("/v1/webhooks", json={"url": "http://127.0.0.1:99999/hook"})
    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")


async def test_an_address_turned_internal_after_subscribing_is_not_delivered_to(
    tenant: httpx.AsyncClient,
    receiver: Receiver,
    allow_private: None,
    inprocess_api: InProcessApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DNS rebinding: the host passed the check when it subscribed (here because private
    receivers were allowed then) and resolves to loopback when delivered; the dispatcher
    checks the address again when it connects and never reaches the receiver."""
    hook = await subscribe(tenant, receiver.url.replace("127.0.0.1", "localhost"))
    runtime = inprocess_api.app.state.runtime
    monkeypatch.setattr(runtime.settings.relay, "webhook_allow_private", False)
    deliveries = f"/v1/webhooks/{hook['id']}/deliveries"
    # The session's relay (which may reach loopback) frozen: this process's dispatcher,
    # with the operator's default, delivers alone.
    with only_running():
        user = f"rebound-{uuid.uuid4().hex[:8]}"
        created = await tenant.post(memories_path(user), json={"content": "kept in"})
        assert created.status_code == 201, created.text

        async def attempted() -> list[dict[str, Any]]:
            await runtime.webhooks.run_once()
            items = (await tenant.get(deliveries)).json()["items"]
            return items if items and items[0]["log"] else []

        (delivery,) = await wait_until(attempted)
    attempt = delivery["log"][0]
    assert attempt["status_code"] is None
    assert attempt["error"].startswith("ConnectError"), attempt["error"]
    assert "loopback" in attempt["error"] and "COGNIS_WEBHOOK_ALLOW_PRIVATE" in attempt["error"]
    assert delivery["status"] == "pending"  # retried later, like any refused connection
    assert receiver.received == []


async def test_erasing_a_user_removes_its_queued_events_but_not_its_user_erased(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None
) -> None:
    hook = await subscribe(tenant, receiver.url)
    receiver.status = 500
    user, kept = f"erased-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    for who, content in ((user, "secret one"), (user, "secret two"), (kept, "kept one")):
        created = await tenant.post(memories_path(who), json={"content": content})
        assert created.status_code == 201, created.text
    deliveries = f"/v1/webhooks/{hook['id']}/deliveries"
    before = (await tenant.get(deliveries)).json()["items"]
    assert sorted(d["user_id"] for d in before) == sorted([user, user, kept])
    erased = await tenant.delete(f"/v1/users/{user}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["webhook_deliveries"] == 2
    attempted = len(receiver.received)
    after = (await tenant.get(deliveries)).json()["items"]
    # Newest first: the erase's own event, queued after the user's others were deleted.
    assert [(d["type"], d["user_id"]) for d in after] == [
        ("user.erased", user),
        ("memory.created", kept),
    ]
    receiver.status = 200
    # Pending or already dead after their three failures: queued again either way.
    for delivery in after:
        again = await tenant.post(f"{deliveries}/{delivery['id']}/redeliver")
        assert again.status_code == 202, again.text

    async def delivered() -> dict[str, dict[str, Any]]:
        # One of each; one may come twice: delivered while pending, and then again on request.
        got = {e["type"]: e for e in receiver.accepted()}
        return got if len(got) >= 2 else {}

    events = await wait_until(delivered)
    assert sorted(events) == ["memory.created", "user.erased"]
    assert events["memory.created"]["data"]["user_id"] == kept
    gone = events["user.erased"]
    assert signed_by(gone, hook["secret"])
    assert gone["data"]["user_id"] == user
    assert datetime.fromisoformat(gone["data"]["erased_at"]) == datetime.fromisoformat(
        erased.json()["erased_at"]
    )
    assert (gone["data"]["memory_versions"], gone["data"]["messages"]) == (2, 0)
    # No content: nothing the user wrote travels in the event that reports its erasure.
    assert b"secret" not in gone["_body"]
    # The erased user's memories were refused (500) before the erase and never sent after it.
    assert [r["status"] for r in receiver.received[:attempted]] == [500] * attempted
    assert all(
        json.loads(r["body"])["data"]["user_id"] == kept
        for r in receiver.received[attempted:]
        if json.loads(r["body"])["type"] == "memory.created"
    )
