"""mem0's client and a native HTTP client for one API process, closed after the test."""

from __future__ import annotations

import os

# Before mem0 is imported: its telemetry would try the network.
os.environ["MEM0_TELEMETRY"] = "false"

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from mem0 import MemoryClient

from tests.conftest import API_KEY, ApiProcess


@contextmanager
def mem0_of(api: ApiProcess) -> Iterator[MemoryClient]:
    client = MemoryClient(api_key=API_KEY, host=api.url)
    try:
        yield client
    finally:
        client.client.close()


@contextmanager
def native_of(api: ApiProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers={"X-API-Key": API_KEY}, timeout=60) as http:
        yield http
