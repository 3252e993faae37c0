"""docs/webhooks.md's receiver in Python, run as written (only its secret, host and port swapped
for the test's): it prints each event the relay delivers once, and refuses a forged one."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import httpx

from bench.ports import free_port
from tests.conftest import wait_until
from tests.doc_blocks import one_run_by
from tests.webhooks.helpers import memories_path, subscribe


async def test_the_docs_receiver_prints_each_event_and_refuses_a_forged_one(
    tenant: httpx.AsyncClient, allow_private: None, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/cognis"
    hook = await subscribe(tenant, url, event_types=["memory.created"])
    code = one_run_by(__file__, "docs/webhooks.md", "class Receiver(")
    code = code.replace('"whsec_..."', repr(hook["secret"]))
    code = code.replace('("0.0.0.0", 8080)', f'("127.0.0.1", {port})')
    printed = tmp_path / "printed.txt"
    with printed.open("w") as out:
        receiver = await asyncio.create_subprocess_exec(
            sys.executable, "-u", "-c", code, stdout=out
        )
    try:

        async def listening() -> bool:
            try:
                async with httpx.AsyncClient() as http:
                    await http.get(url)
            except httpx.TransportError:
                return False
            return True

        await wait_until(listening)
        async with httpx.AsyncClient() as http:
            forged = await http.post(
                url,
                content=b'{"id": "x", "type": "memory.created", "data": {}}',
                headers={
                    "webhook-id": "x",
                    "webhook-timestamp": str(int(time.time())),
                    "webhook-signature": "v1,AAAA",
                },
            )
        assert forged.status_code == 401

        user = f"hooked-{uuid.uuid4().hex[:8]}"
        created = await tenant.post(memories_path(user), json={"content": "I keep bees"})
        assert created.status_code == 201, created.text
        line = f"memory.created {user} {created.json()['id']}\n"

        async def delivered() -> bool:
            return line in printed.read_text()

        await wait_until(delivered, timeout=120)
        assert printed.read_text() == line  # once, and nothing of the forged one
    finally:
        receiver.terminate()
        await asyncio.wait_for(receiver.wait(), 30)
