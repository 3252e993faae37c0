"""Another tenant's webhook latency while one tenant's receivers are slow (issue 54), against
the running service (`make up`, with COGNIS_WEBHOOK_ALLOW_PRIVATE=true: the receivers are on
loopback in this process):

    COGNIS_WEBHOOK_ALLOW_PRIVATE=true make up && make bench-webhook-isolation

Two tenants made for the run (the admin key). The quiet tenant's receiver answers at once; it
writes memories one at a time, the next after the event arrived, and each event's latency is
timed from the 201's arrival to the receipt. First alone (the baseline), then while the noisy
tenant's subscriptions are a receiver that sleeps `--sleep-s` before answering and one that
trickles its answer a byte every `--trickle-every-s`, and the noisy tenant keeps writing (a
memory every `--noisy-every-s`, on several users), so its slow deliveries are always queued.
The noisy tenant's writes alone (no subscription) are measured between the two: what its
load costs the quiet tenant without any slow receiver. Prints the p50 (and spread) of the
three and their ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from bench import as_client
from bench.foundation import summary
from bench.ports import free_port
from bench.webhook_receiver import WebhookReceiver


class TricklingReceiver:
    """A receiver that answers 200 with a 100-byte body, one byte every `every_s`."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.stop = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
                for _ in range(100):
                    if self.stop.wait(self.every_s):
                        return
                    connection.sendall(b"x")
            except OSError:
                return

    def _serve(self) -> None:
        self.server.settimeout(0.1)
        while not self.stop.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.server.close()


def new_tenant(admin: httpx.Client, label: str) -> tuple[str, str]:
    """A tenant of the run: (its name, a key of it)."""
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    admin.post("/admin/v1/tenants", json={"name": name}).raise_for_status()
    issued = admin.post(f"/admin/v1/tenants/{name}/keys", json={"name": "bench"})
    issued.raise_for_status()
    return name, issued.json()["key"]


def subscribe(client: httpx.Client, url: str) -> None:
    created = client.post("/v1/webhooks", json={"url": url, "event_types": ["memory.created"]})
    if created.status_code == 400 and "ALLOW_PRIVATE" in created.text:
        sys.exit(f"start the API with COGNIS_WEBHOOK_ALLOW_PRIVATE=true: {created.text}")
    created.raise_for_status()


def quiet_latencies(client: httpx.Client, receiver: WebhookReceiver, samples: int) -> list[float]:
    """Milliseconds from each 201 to its event's receipt, one write at a time."""
    user = f"quiet-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []
    for n in range(samples):
        before = len(receiver.records)
        as_client.post_sync(client, f"/v1/users/{user}/memories", json={"content": f"probe {n}"})
        answered = time.time()
        deadline = time.monotonic() + 120
        while len(receiver.records) <= before and time.monotonic() < deadline:
            time.sleep(0.002)
        if len(receiver.records) <= before:
            print(f"  probe {n} not received within 120 s", file=sys.stderr)
            continue
        latencies.append((receiver.records[before]["received_at"] - answered) * 1000)
    return latencies


def keep_writing(client: httpx.Client, every_s: float, stop: threading.Event) -> int:
    """The noisy tenant's writes until `stop`: how many."""
    written = 0
    while not stop.is_set():
        user = f"noisy-{written % 8}-{os.getpid()}"
        as_client.post_sync(client, f"/v1/users/{user}/memories", json={"content": f"n {written}"})
        written += 1
        stop.wait(every_s)
    return written


@contextlib.contextmanager
def noisy_writes(client: httpx.Client, every_s: float, warm_s: float) -> Iterator[None]:
    """The noisy tenant writing in a thread for the block (after `warm_s` of it)."""
    stop = threading.Event()
    writer = threading.Thread(target=keep_writing, args=(client, every_s, stop))
    writer.start()
    time.sleep(warm_s)
    try:
        yield
    finally:
        stop.set()
        writer.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--admin-key", default=os.environ.get("COGNIS_ADMIN_KEY", "cognis-admin"))
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--sleep-s", type=float, default=15.0)
    parser.add_argument("--trickle-every-s", type=float, default=5.0)
    parser.add_argument("--noisy-every-s", type=float, default=0.5)
    parser.add_argument("--warm-s", type=float, default=5.0, help="noisy writes before probing")
    args = parser.parse_args()

    admin = httpx.Client(base_url=args.api, headers={"X-API-Key": args.admin_key}, timeout=300)
    _, quiet_key = new_tenant(admin, "bench-quiet")
    _, noisy_key = new_tenant(admin, "bench-noisy")
    quiet = httpx.Client(base_url=args.api, headers={"X-API-Key": quiet_key}, timeout=300)
    noisy = httpx.Client(base_url=args.api, headers={"X-API-Key": noisy_key}, timeout=300)
    fast = WebhookReceiver(port=free_port()).start()
    sleeping = WebhookReceiver(port=free_port(), delay_s=args.sleep_s).start()
    trickling = TricklingReceiver(args.trickle_every_s)
    results: dict[str, Any] = {}
    try:
        subscribe(quiet, fast.url)
        quiet_latencies(quiet, fast, 3)  # connections and caches warm
        results["alone"] = quiet_latencies(quiet, fast, args.samples)
        # The noisy tenant's writes alone first: what its load costs without a slow receiver.
        with noisy_writes(noisy, args.noisy_every_s, args.warm_s):
            results["writes"] = quiet_latencies(quiet, fast, args.samples)
        subscribe(noisy, sleeping.url)
        subscribe(noisy, trickling.url)
        with noisy_writes(noisy, args.noisy_every_s, args.warm_s):
            results["slow"] = quiet_latencies(quiet, fast, args.samples)
    finally:
        trickling.close()
        sleeping.close()
        fast.close()
    p50 = {name: sorted(values)[len(values) // 2] for name, values in results.items()}
    print(f"quiet tenant's latency, 201 -> receipt (n={args.samples} each):")
    print(f"  alone:                                   {summary(results['alone'])}")
    print(f"  noisy tenant writing, no subscriptions:  {summary(results['writes'])}")
    print(
        f"  noisy tenant writing, a {args.sleep_s:g} s sleeper and a byte-every-"
        f"{args.trickle_every_s:g}-s trickler subscribed: {summary(results['slow'])}"
    )
    print(
        f"  p50 ratio, slow receivers / alone: {p50['slow'] / p50['alone']:.2f}; "
        f"slow receivers / the same writes without them: {p50['slow'] / p50['writes']:.2f}"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
