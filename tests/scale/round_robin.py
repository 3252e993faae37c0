"""A round-robin TCP proxy on loopback: several API processes behind one address, as a load
balancer puts them. Each new connection goes to the next backend, so a client that opens a
connection per request spreads its requests over every process.

It runs its own event loop in a thread: nothing of it runs in the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import Counter

from bench.ports import free_port

CHUNK = 65536


class RoundRobinProxy:
    """Listens on 127.0.0.1:`port` and pipes each connection to the next of `backends`
    (host, port); `connections` counts the connections each backend was given."""

    def __init__(self, *backends: tuple[str, int]) -> None:
        self.backends = backends
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections: Counter[tuple[str, int]] = Counter()
        self._next = itertools.cycle(backends)
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    def start(self) -> RoundRobinProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the round-robin proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def served(self) -> Counter[tuple[str, int]]:
        """A copy of the connection counts, per backend."""
        with self._lock:
            return Counter(self.connections)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        pipes: set[asyncio.Task] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            pipes.add(task)
            try:
                await self._forward(reader, writer)
            finally:
                pipes.discard(task)

        server = await asyncio.start_server(accept, "127.0.0.1", self.port)
        self._ready.set()
        async with server:
            await self._stop.wait()
        for task in list(pipes):
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            backend = next(self._next)
            self.connections[backend] += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*backend)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            _pipe(reader, upstream_writer), _pipe(upstream_reader, writer), return_exceptions=True
        )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side ends, then close the writing side (the other pipe then ends)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
