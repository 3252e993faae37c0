"""A receiver that trickles its answer a byte at a time is cut off at COGNIS_WEBHOOK_TIMEOUT_S
(10 s, the default) for the whole POST, not for each read (issue 54): httpx's own timeout let
one such POST run for 60 s and hold the dispatcher's batch with it."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import InProcessApi, only_running, wait_until
from tests.webhooks.helpers import memories_path, subscribe


@pytest.fixture
def trickling_receiver() -> Iterator[str]:
    """A server on loopback that answers 200 with a 100-byte body, one byte every 0.5 s."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
            for _ in range(100):
                if stop.wait(0.5):
                    return
                try:
                    connection.sendall(b"x")
                except OSError:
                    return

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    stop.set()
    thread.join()
    server.close()


async def test_a_trickling_receiver_is_cut_off_at_the_deadline(
    tenant: httpx.AsyncClient,
    trickling_receiver: str,
    allow_private: None,
    inprocess_api: InProcessApi,
) -> None:
    hook = await subscribe(tenant, trickling_receiver)
    runtime = inprocess_api.app.state.runtime
    deadline = runtime.settings.relay.webhook_timeout_s
    deliveries = f"/v1/webhooks/{hook['id']}/deliveries"
    # The session's relay frozen: this process's dispatcher delivers alone, timed here.
    with only_running():
        user = f"trickled-{uuid.uuid4().hex[:8]}"
        created = await tenant.post(memories_path(user), json={"content": "slowly answered"})
        assert created.status_code == 201, created.text
        started = time.monotonic()
        assert await runtime.webhooks.run_once()
        took = time.monotonic() - started

    async def attempted() -> list[dict[str, Any]]:
        items = (await tenant.get(deliveries)).json()["items"]
        return items if items and items[0]["log"] else []

    (delivery,) = await wait_until(attempted)
    # 100 bytes at 2 a second would take 50 s; the whole POST stops at the deadline.
    assert took < deadline + 1.5, took
    attempt = delivery["log"][0]
    assert attempt["status_code"] is None
    assert attempt["error"].startswith("Timeout"), attempt["error"]
    assert deadline * 1000 * 0.9 <= attempt["duration_ms"] <= (deadline + 1) * 1000
