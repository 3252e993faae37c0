"""The receiver docs/webhooks.md shows ("A receiver in Python"), run as the page prints it
(only its secret filled in and its last line, which serves forever on port 8080, left out) on
loopback: it gets a real delivery from the dispatcher, verifies its signature and answers 204;
and its `verified` refuses a body changed in transit, another secret's signature and a stale
timestamp."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from app.webhooks.signing import new_secret, sign
from tests.conftest import ROOT, wait_until
from tests.webhooks.helpers import memories_path, subscribe

GUIDE = ROOT / "docs" / "webhooks.md"
PLACEHOLDER = 'SECRET = "whsec_..."'


def documented_receiver(secret: str) -> dict[str, Any]:
    """The namespace the page's receiver defines (`verified`, `Receiver`, `seen`), keyed by
    `secret`."""
    section = GUIDE.read_text().split("## A receiver in Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    body, serve = code.rstrip().rsplit("\n", 1)
    assert serve.startswith("HTTPServer(") and serve.endswith(".serve_forever()"), serve
    assert body.count(PLACEHOLDER) == 1, "the page's receiver no longer sets SECRET as expected"
    namespace: dict[str, Any] = {"__name__": "documented_receiver"}
    exec(compile(body.replace(PLACEHOLDER, f"SECRET = {secret!r}"), str(GUIDE), "exec"), namespace)  # noqa: S102
    return namespace


def _headers(event_id: str, timestamp: int, signature: str) -> dict[str, str]:
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


def test_the_documented_verification_refuses_what_it_must() -> None:
    secret = new_secret()
    verified = documented_receiver(secret)["verified"]
    event_id, now = str(uuid.uuid4()), int(time.time())
    body = json.dumps({"id": event_id, "type": "memory.created", "data": {}}).encode()
    assert verified(_headers(event_id, now, sign(secret, event_id, now, body)), body)
    # A second signature beside it (a secret being rotated): either one may match.
    both = f"v1,{'A' * 43}= {sign(secret, event_id, now, body)}"
    assert verified(_headers(event_id, now, both), body)
    assert not verified(_headers(event_id, now, sign(secret, event_id, now, body)), body + b" ")
    other = new_secret()
    assert not verified(_headers(event_id, now, sign(other, event_id, now, body)), body)
    stale = now - 3600
    assert not verified(_headers(event_id, stale, sign(secret, event_id, stale, body)), body)


async def test_the_documented_receiver_takes_a_real_delivery(
    tenant: httpx.AsyncClient, allow_private: None
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{server.server_address[1]}/cognis"
    hook = await subscribe(tenant, url, event_types=["memory.created"])
    receiver = documented_receiver(hook["secret"])
    server.RequestHandlerClass = receiver["Receiver"]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        user = f"documented-{uuid.uuid4().hex[:8]}"
        created = await tenant.post(memories_path(user), json={"content": "I keep bees"})
        assert created.status_code == 201, created.text

        async def delivered() -> list[dict[str, Any]]:
            log = await tenant.get(f"/v1/webhooks/{hook['id']}/deliveries")
            items = log.json()["items"]
            return items if items and items[0]["status"] == "delivered" else []

        (delivery,) = await wait_until(delivered)
        # Verified and answered 204 by the page's code: a refused signature answers 401.
        assert [attempt["status_code"] for attempt in delivery["log"]] == [204]
        assert receiver["seen"] == {delivery["event_id"]}
    finally:
        server.shutdown()
        server.server_close()
