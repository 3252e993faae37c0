"""The console's tests talk to one API process: the console under test is that process's, and
the memories they set up are written through its REST API (no in-process API, with a second
copy of the models, is loaded beside it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import ApiProcess


@pytest.fixture
async def api_client(api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with api.client() as http:
        yield http


@pytest.fixture
async def browser_like(api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A cookie-keeping client of the console (as a browser is), not following redirects."""
    async with httpx.AsyncClient(base_url=api.url, timeout=60) as http:
        yield http
