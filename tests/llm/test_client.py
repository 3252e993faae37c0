"""The chat-completions client against the scripted server over real HTTP (no API process)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from app.config import Settings
from app.llm.client import ChatClient, LLMError
from bench.scripted_llm import Reply, ScriptedLLM

SCHEMA = {"type": "object", "properties": {"operations": {"type": "array"}}}
PROMPT = [{"role": "user", "content": "hello client"}]


@pytest.fixture
def server() -> Iterator[ScriptedLLM]:
    llm = ScriptedLLM()
    yield llm
    llm.close()


def _settings(server: ScriptedLLM, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": "postgresql+asyncpg://unused@127.0.0.1/unused",
        "llm_base_url": server.base_url,
        "llm_model": "scripted-model",
        "llm_timeout_s": 0.5,
        "llm_max_retries": 2,
        "llm_backoff_base_s": 0.01,
    }
    return Settings(**(values | overrides))  # type: ignore[arg-type]


@pytest.fixture
async def client(server: ScriptedLLM) -> AsyncIterator[ChatClient]:
    chat = ChatClient(_settings(server).llm)
    yield chat
    await chat.close()


async def test_json_schema_is_asked_for_first(server: ScriptedLLM, client: ChatClient) -> None:
    server.script("hello", Reply.json({"operations": []}))
    completion = await client.complete_json(PROMPT, SCHEMA)
    assert completion.content == '{"operations": []}'
    assert completion.model == "scripted-model" and completion.latency_ms > 0
    (request,) = server.requests
    assert request.response_format == "json_schema"
    assert request.body["response_format"]["json_schema"]["schema"] == SCHEMA


async def test_falls_back_to_json_object_then_plain_and_remembers(
    server: ScriptedLLM, client: ChatClient
) -> None:
    server.rejected_formats |= {"json_schema", "json_object"}
    await client.complete_json(PROMPT, SCHEMA)
    assert [r.response_format for r in server.requests] == ["json_schema", "json_object", None]
    await client.complete_json(PROMPT, SCHEMA)
    assert server.requests[-1].response_format is None
    assert len(server.requests) == 4


async def test_transient_errors_are_retried(server: ScriptedLLM, client: ChatClient) -> None:
    server.script("hello", Reply(status=503), Reply(status=429), Reply.json({"operations": []}))
    completion = await client.complete_json(PROMPT, SCHEMA)
    assert completion.content == '{"operations": []}'
    assert len(server.requests) == 3


async def test_a_timeout_after_all_retries_is_an_llm_error(server: ScriptedLLM) -> None:
    server.script("hello", Reply(delay_s=1.0))
    chat = ChatClient(_settings(server, llm_max_retries=1, llm_timeout_s=0.2).llm)
    try:
        with pytest.raises(LLMError, match="Timeout"):
            await chat.complete_json(PROMPT, SCHEMA)
    finally:
        await chat.close()
    assert len(server.requests) == 2


async def test_client_errors_are_not_retried(server: ScriptedLLM, client: ChatClient) -> None:
    server.script("hello", Reply(status=401, error_body={"error": {"message": "bad key"}}))
    with pytest.raises(LLMError, match="HTTP 401"):
        await client.complete_json(PROMPT, SCHEMA)
    assert len(server.requests) == 1
