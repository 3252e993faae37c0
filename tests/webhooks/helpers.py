"""What the webhook tests share: a receiving HTTP server on loopback, subscribing through the
API, and checking what a receiver was sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from app.webhooks.signing import verify


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
        # A short poll: close() waits for the loop to look (0.5 s by default).
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def accepted(self, *types: str) -> list[dict[str, Any]]:
        """The events answered 2xx (of `types`, when given), as their bodies, with the
        request's headers."""
        with self.lock:
            return [
                {**json.loads(r["body"]), "_headers": r["headers"], "_body": r["body"]}
                for r in self.received
                if r["status"] < 300 and (not types or json.loads(r["body"])["type"] in types)
            ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def subscribe(client: httpx.AsyncClient, url: str, **extra: Any) -> dict[str, Any]:
    created = await client.post("/v1/webhooks", json={"url": url, **extra})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["secret"].startswith("whsec_")
    return body


def signed_by(event: dict[str, Any], secret: str) -> bool:
    """Whether a received event's signature is `secret`'s (and its webhook-id its id)."""
    headers = {k.lower(): v for k, v in event["_headers"].items()}
    return headers["webhook-id"] == event["id"] and verify(
        secret,
        headers["webhook-id"],
        int(headers["webhook-timestamp"]),
        event["_body"],
        headers["webhook-signature"],
    )


def memories_path(user: str) -> str:
    return f"/v1/users/{user}/memories"
