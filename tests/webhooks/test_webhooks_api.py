"""Webhooks against the real API and a real receiver on loopback: events written with the
change, delivered signed and in order by the relay process's dispatcher, retried while the
receiver fails, dead after the limit, never another tenant's; URLs into private ranges refused."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from app.webhooks.signing import verify
from tests.conftest import InProcessApi, wait_until
from tests.tenants.helpers import new_tenant, tenant_client


class Receiver:
    """An HTTP server on 127.0.0.1 that answers `status` and records what it was sent."""

    def __init__(self) -> None:
        self.status = 200
        self.fail_next = 0  # answer 500 to this many requests first, whatever `status` says
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                with receiver.lock:
                    status = receiver.status
                    if receiver.fail_next > 0:
                        receiver.fail_next -= 1
                        status = 500
                    receiver.received.append(
                        {"headers": dict(self.headers.items()), "body": body, "status": status}
                    )
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def accepted(self) -> list[dict[str, Any]]:
        """The events answered 2xx, as their bodies, with the request's headers."""
        with self.lock:
            return [
                {**json.loads(r["body"]), "_headers": r["headers"], "_body": r["body"]}
                for r in self.received
                if r["status"] < 300
            ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def allow_private(inprocess_api: InProcessApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's COGNIS_WEBHOOK_ALLOW_PRIVATE=true, for a receiver on loopback."""
    settings = inprocess_api.app.state.runtime.settings
    monkeypatch.setattr(settings, "webhook_allow_private", True)


@pytest.fixture
async def tenant(admin: httpx.AsyncClient, inprocess_api: InProcessApi) -> AsyncIterator[Any]:
    key = await new_tenant(admin, "hooks")
    async with tenant_client(inprocess_api, key.key) as client:
        yield client


async def _subscribe(client: httpx.AsyncClient, url: str, **extra: Any) -> dict[str, Any]:
    created = await client.post("/v1/webhooks", json={"url": url, **extra})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["secret"].startswith("whsec_")
    return body


def _memories(user: str) -> str:
    return f"/v1/users/{user}/memories"


async def test_create_update_delete_arrive_once_each_signed_and_in_order(
    tenant: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    inprocess_api: InProcessApi,
    receiver: Receiver,
    allow_private: None,
) -> None:
    hook = await _subscribe(tenant, receiver.url)
    # Another tenant's subscription, to the same receiver: it must receive nothing of ours.
    other_key = await new_tenant(admin, "hooks-other")
    other_receiver = Receiver()
    try:
        async with tenant_client(inprocess_api, other_key.key) as other:
            other_hook = await _subscribe(other, other_receiver.url)
            listed = (await other.get("/v1/webhooks")).json()["items"]
            assert [h["id"] for h in listed] == [other_hook["id"]]
            assert all(h["secret"] is None for h in listed)
            assert (await other.get(f"/v1/webhooks/{hook['id']}")).status_code == 404
            assert (await other.delete(f"/v1/webhooks/{hook['id']}")).status_code == 404
        assert [h["id"] for h in (await tenant.get("/v1/webhooks")).json()["items"]] == [hook["id"]]

        user = f"hooked-{uuid.uuid4().hex[:8]}"
        created = await tenant.post(_memories(user), json={"content": "I live in Lisbon"})
        assert created.status_code == 201, created.text
        memory_id = created.json()["id"]
        updated = await tenant.patch(
            f"{_memories(user)}/{memory_id}", json={"content": "I live in Porto"}
        )
        assert updated.status_code == 200, updated.text
        deleted = await tenant.delete(f"{_memories(user)}/{updated.json()['id']}")
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
            headers = {k.lower(): v for k, v in event["_headers"].items()}
            assert headers["webhook-id"] == event["id"]
            assert verify(
                hook["secret"],
                headers["webhook-id"],
                int(headers["webhook-timestamp"]),
                event["_body"],
                headers["webhook-signature"],
            )
            assert not verify(
                other_hook["secret"],
                headers["webhook-id"],
                int(headers["webhook-timestamp"]),
                event["_body"],
                headers["webhook-signature"],
            )
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
        more = await tenant.post(_memories(user), json={"content": "A marker after the three"})
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
    hook = await _subscribe(tenant, receiver.url)
    # Two failures, fewer than COGNIS_WEBHOOK_MAX_ATTEMPTS=3: the first event is retried.
    receiver.fail_next = 2
    user = f"retried-{uuid.uuid4().hex[:8]}"
    contents = [f"fact number {n}" for n in range(4)]
    batch = await tenant.post(
        f"{_memories(user)}/batch", json={"memories": [{"content": c} for c in contents]}
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
    hook = await _subscribe(tenant, receiver.url)
    receiver.status = 503
    user = f"dead-{uuid.uuid4().hex[:8]}"
    assert (await tenant.post(_memories(user), json={"content": "never heard"})).status_code == 201
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
        ({"url": "https://example.com/x", "event_types": ["memory.exploded"]}, "choose among"),
        ({"url": "https://example.com/x", "event_types": ["user.erased"]}, "not emitted"),
    ):
        refused = await tenant.post("/v1/webhooks", json=body)
        assert refused.status_code == 400, refused.text
        assert words in refused.json()["detail"]


async def test_erasing_a_user_removes_its_queued_events(
    tenant: httpx.AsyncClient, receiver: Receiver, allow_private: None
) -> None:
    hook = await _subscribe(tenant, receiver.url)
    receiver.status = 500
    user, kept = f"erased-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    for who in (user, user, kept):
        assert (await tenant.post(_memories(who), json={"content": "queued"})).status_code == 201
    deliveries = f"/v1/webhooks/{hook['id']}/deliveries"
    before = (await tenant.get(deliveries)).json()["items"]
    assert sorted(d["user_id"] for d in before) == sorted([user, user, kept])
    erased = await tenant.delete(f"/v1/users/{user}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["postgres"]["webhook_deliveries"] == 2
    after = (await tenant.get(deliveries)).json()["items"]
    assert [d["user_id"] for d in after] == [kept]
    receiver.status = 200
    # Pending or already dead after its three failures: queued again either way.
    again = await tenant.post(f"{deliveries}/{after[0]['id']}/redeliver")
    assert again.status_code == 202, again.text

    async def delivered() -> list[dict[str, Any]]:
        return receiver.accepted()

    (event,) = await wait_until(delivered)
    assert event["data"]["user_id"] == kept
