"""A webhook receiver on loopback for the webhook bench and tests (bench/webhooks.py,
tests/webhooks/test_kill_mid_stream.py): every POST is recorded, then answered 204.

A record holds the time of receipt (time.time(), the clock Postgres stamps events with on this
machine), the `webhook-*` headers and the body. With `--log`, each is appended to that file as
one JSON line, in one write, before the answer: a receiver killed at any moment has recorded
every event it acknowledged (and maybe one it had not yet answered, which the sender repeats).

    python -m bench.webhook_receiver --port 8099 --log received.jsonl [--delay-ms 20]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


class _Server(ThreadingHTTPServer):
    # The listen backlog: socketserver's 5 drops the connections of a dispatcher that POSTs a
    # batch at once, and each dropped SYN is sent again a second later.
    request_queue_size = 128
    daemon_threads = True


class WebhookReceiver:
    """A ThreadingHTTPServer on 127.0.0.1:`port` (0: any free port), serving from a thread."""

    def __init__(self, port: int = 0, log: str | None = None, delay_s: float = 0.0) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._log = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log else None
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a receiver behind any proxy

            def do_POST(self) -> None:
                length = int(self.headers["content-length"])
                body = self.rfile.read(length)
                if len(body) < length:  # the sender went away mid-request: no event, no answer
                    self.close_connection = True
                    return
                record = {
                    "received_at": time.time(),
                    **{name: self.headers.get(name) for name in HEADERS},
                    "body": body.decode(),
                }
                receiver.record(record)
                if delay_s:
                    time.sleep(delay_s)  # a receiver that takes its time to answer
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", port), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def record(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.records.append(record)
            if self._log is not None:
                os.write(self._log, (json.dumps(record) + "\n").encode())

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._log is not None:
            os.close(self._log)


def read_log(path: str) -> list[dict[str, Any]]:
    """The records a `--log` file holds, in the order they were received."""
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True, help="JSON lines file, appended to")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="wait before answering")
    args = parser.parse_args()
    receiver = WebhookReceiver(args.port, args.log, args.delay_ms / 1000)
    print(f"listening on {receiver.url}", flush=True)
    receiver.server.serve_forever()


if __name__ == "__main__":
    main()
