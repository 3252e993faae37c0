"""Ingestion fixtures: the scripted LLM server and an API process that talks to it.

The LLM-backed API works its own job queue, so the session's plain API (deterministic
extractor, queue "default") never takes its jobs, and vice versa.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from bench.scripted_llm import ScriptedLLM
from tests.conftest import ApiProcess

LLM_QUEUE = "llm-tests"
LLM_TIMEOUT_S = 2.0
# Long enough that two requests sent back to back are both queued before a worker looks.
SETTLE_MS = 1500


@pytest.fixture(scope="session")
def scripted_llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM()
    yield server
    server.close()


@pytest.fixture
def llm(scripted_llm: ScriptedLLM) -> ScriptedLLM:
    scripted_llm.reset()
    return scripted_llm


@pytest.fixture(scope="session")
def llm_api(migrated: dict[str, str], scripted_llm: ScriptedLLM) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_LLM_BASE_URL": scripted_llm.base_url,
        "COGNIS_LLM_MODEL": scripted_llm.model,
        "COGNIS_LLM_API_KEY": "test-llm-key",
        "COGNIS_LLM_TIMEOUT_S": str(LLM_TIMEOUT_S),
        "COGNIS_LLM_MAX_RETRIES": "0",
        "COGNIS_INGEST_QUEUE": LLM_QUEUE,
        "COGNIS_INGEST_SETTLE_MS": str(SETTLE_MS),
        "COGNIS_INGEST_POLL_INTERVAL_S": "0.2",
        # The gate open: these tests script what the LLM answers for every message.
        "COGNIS_INGEST_LLM_GATE_THRESHOLD": "0",
        # No category questions to the LLM: the requests seen are the decisions scripted here
        # (the judge is tested in tests/ml/test_categories.py and with the real local model).
        "COGNIS_CATEGORY_UNCERTAIN_MARGIN": "0",
    }
    process = ApiProcess(env, "api-llm")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
async def llm_client(llm_api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with llm_api.client() as http:
        yield http


GATED_QUEUE = "llm-gated-tests"


@pytest.fixture(scope="session")
def gated_llm_api(llm_api: ApiProcess, scripted_llm: ScriptedLLM) -> Iterator[ApiProcess]:
    """The same scripted LLM behind the default LLM gate, on its own queue."""
    env = {
        **llm_api.env,
        "COGNIS_INGEST_QUEUE": GATED_QUEUE,
        "COGNIS_INGEST_LLM_GATE_THRESHOLD": "0.3",
        "COGNIS_INGEST_SETTLE_MS": "0",
    }
    process = ApiProcess(env, "api-llm-gated")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
async def gated_client(gated_llm_api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with gated_llm_api.client() as http:
        yield http


@pytest.fixture(autouse=True)
def _ingest_worker_for_the_in_process_api(request: pytest.FixtureRequest) -> None:
    """Tests here that send messages through the in-process API (`client`) need its worker."""
    if "client" in request.fixturenames:
        request.getfixturevalue("ingest_worker")
