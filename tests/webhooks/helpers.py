"""What the webhook tests share: a receiving HTTP server on loopback, subscribing through the
API, and checking what a receiver was sent."""

from __future__ import annotations

import json
import socket
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


class SlowReceiver:
    """A receiver on loopback that is slow on purpose, on a raw socket: `hold` answers 200
    only once `release` is set (a receiver that sleeps), `trickle` sends a 200 whose 100-byte
    body comes a byte every `every_s` (a receiver that trickles). It counts the requests it
    has open now and at most, so a test can tell what is in flight without a clock."""

    def __init__(self, mode: str, every_s: float = 0.5) -> None:
        assert mode in ("hold", "trickle")
        self.mode, self.every_s = mode, every_s
        self.release = threading.Event()
        self.arrived = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.open_now = self.max_open = self.requests = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_request(self, connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            chunk = connection.recv(65536)
            if not chunk:
                return
            body += chunk

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            self._read_request(connection)
            with self.lock:
                self.requests += 1
                self.open_now += 1
                self.max_open = max(self.max_open, self.open_now)
            self.arrived.set()
            try:
                if self.mode == "hold":
                    # Released by the test; a minute at most, so nothing hangs for ever.
                    self.release.wait(60)
                    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    return
                connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
                for _ in range(100):
                    if self.stop.wait(self.every_s):
                        return
                    connection.sendall(b"x")
            except OSError:
                return  # the dispatcher gave up on it
            finally:
                with self.lock:
                    self.open_now -= 1

    def _serve(self) -> None:
        self.server.settimeout(0.05)
        while not self.stop.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.release.set()
        self.thread.join()
        self.server.close()
