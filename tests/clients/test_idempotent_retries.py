"""The Python client's retries of writes whose answer was lost: one key per logical call, sent
with every attempt, so the API process does the write once."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from cognis_client import (
    AsyncCognisClient,
    CognisClient,
    CognisError,
    ConflictError,
    NoAnswerError,
    RateLimitedError,
    RetryPolicy,
)

from tests.conftest import API_KEY, ApiProcess

KEY = "Idempotency-Key"
QUICK = RetryPolicy(max_retries=3, backoff_base_s=0.01)


class LostFirstAnswer(httpx.HTTPTransport):
    """Sends every request to the server, but the first answer never arrives: a read timeout
    after the server has done the work (what a client timeout under load looks like)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.sent.append(request)
        if len(self.sent) == 1:
            response.read()
            response.close()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


class AsyncLostFirstAnswer(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.sent.append(request)
        if len(self.sent) == 1:
            await response.aread()
            await response.aclose()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


def test_a_write_retried_after_a_timeout_is_done_once(api: ApiProcess, user_id: str) -> None:
    transport = LostFirstAnswer()
    retries: list[Exception] = []
    with CognisClient(
        api.url,
        api_key=API_KEY,
        retry=QUICK,
        transport=transport,
        on_retry=lambda _attempt, _delay, error: retries.append(error),
    ) as cognis:
        memory = cognis.add_memory(user_id, "Ines keeps bees.")
        stored = cognis.list_memories(user_id).items
    first, retry = transport.sent[:2]
    assert first.headers[KEY] == retry.headers[KEY]
    uuid.UUID(first.headers[KEY])  # a fresh random key per logical call
    assert [type(e) for e in retries] == [httpx.ReadTimeout]
    assert [m.id for m in stored] == [memory.id]  # one memory, the one the first attempt wrote


async def test_async_message_submission_retried_after_a_timeout_is_saved_once(
    api: ApiProcess, user_id: str
) -> None:
    transport = AsyncLostFirstAnswer()
    async with AsyncCognisClient(
        api.url, api_key=API_KEY, retry=QUICK, transport=transport
    ) as cognis:
        job = await cognis.add_messages(user_id, ["I started learning Finnish."])
        again = await cognis.add_messages(user_id, ["I started learning Finnish."])
    keys = [r.headers[KEY] for r in transport.sent]
    assert keys[0] == keys[1] != keys[2]  # a retry reuses its key; a new call has its own
    assert again.job_id != job.job_id
    async with api.client() as http:
        first = (await http.get(f"/v1/users/{user_id}/jobs/{job.job_id}")).json()
    assert len(first["messages"]) == 1


def test_a_key_given_by_the_caller_spans_its_own_retries(api: ApiProcess, user_id: str) -> None:
    key = f"agent-{uuid.uuid4()}"
    with CognisClient(api.url, api_key=API_KEY) as cognis:
        first = cognis.add_memory(user_id, "Ines keeps bees.", idempotency_key=key)
        again = cognis.add_memory(user_id, "Ines keeps bees.", idempotency_key=key)
        assert again == first
        updated = cognis.update_memory(
            user_id, first.id, content="Ines keeps wasps.", idempotency_key=f"{key}-u"
        )
        assert (
            cognis.update_memory(
                user_id, first.id, content="Ines keeps wasps.", idempotency_key=f"{key}-u"
            )
            == updated
        )
        assert [m.id for m in cognis.list_memories(user_id).items] == [updated.id]


def _memory_json(user_id: str) -> dict:
    memory_id = str(uuid.uuid4())
    return {
        "id": memory_id,
        "user_id": user_id,
        "chain_id": memory_id,
        "version": 1,
        "content": "Ines keeps bees.",
        "category": "hobbies",
        "scope": "USER",
        "session_id": None,
        "is_current": True,
        "replaces_id": None,
        "speaker": None,
        "event_time": None,
        "created_at": "2026-12-01T10:00:00Z",
        "superseded_at": None,
        "metadata": {},
        "source_message_id": None,
    }


def test_key_in_use_is_waited_for_then_replayed(user_id: str) -> None:
    """409 idempotency_key_in_use means the first attempt still runs: the client waits as told
    (Retry-After) and asks again with the same key. Any other 409 is raised at once."""
    in_use = {"status": 409, "title": "Idempotency key in use", "code": "idempotency_key_in_use"}
    answers = [
        httpx.Response(409, json={**in_use, "detail": "running"}, headers={"Retry-After": "0"}),
        httpx.Response(201, json=_memory_json(user_id), headers={"Idempotency-Replayed": "true"}),
        httpx.Response(409, json={"status": 409, "title": "Conflict", "detail": "superseded"}),
    ]
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answers[len(sent) - 1]

    with CognisClient("http://cognis.test", transport=httpx.MockTransport(answer)) as cognis:
        memory = cognis.add_memory(user_id, "Ines keeps bees.")
        assert [r.headers[KEY] for r in sent] == [sent[0].headers[KEY]] * 2
        assert str(memory.id) == answers[1].json()["id"]
        with pytest.raises(ConflictError):
            cognis.delete_memory(user_id, memory.id)
    assert len(sent) == 3 and json.loads(sent[0].content)["content"] == "Ines keeps bees."


def test_giving_up_names_the_key_to_retry_with(user_id: str) -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    with (
        CognisClient(
            "http://cognis.test",
            transport=httpx.MockTransport(never),
            retry=RetryPolicy(max_retries=1, backoff_base_s=0.01),
        ) as cognis,
        pytest.raises(NoAnswerError) as timed_out,
    ):
        cognis.add_memory(user_id, "Ines keeps bees.", idempotency_key="agent-key-1")
    error = timed_out.value
    assert isinstance(error, CognisError) and isinstance(error.__cause__, httpx.ReadTimeout)
    assert error.may_have_written is True and error.idempotency_key == "agent-key-1"
    assert "may or may not have happened" in error.detail and "agent-key-1" in error.detail
    assert any("agent-key-1" in note for note in error.__notes__)


def test_a_read_or_a_refused_connection_cannot_have_written(user_id: str) -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def silent(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    once = RetryPolicy(max_retries=0)
    url = "http://cognis.test"
    with CognisClient(url, transport=httpx.MockTransport(refused), retry=once) as c:
        with pytest.raises(NoAnswerError) as not_sent:
            c.add_memory(user_id, "Ines keeps bees.")
        assert not_sent.value.may_have_written is False and not_sent.value.idempotency_key
    with CognisClient(url, transport=httpx.MockTransport(silent), retry=once) as c:
        with pytest.raises(NoAnswerError) as read:
            c.list_memories(user_id)
        assert read.value.may_have_written is False and read.value.idempotency_key is None


def test_rate_limited_answers_are_retried_after_retry_after(user_id: str) -> None:
    limited = {"status": 429, "title": "Too many requests", "detail": "slow down"}
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) == 1:
            return httpx.Response(429, json=limited, headers={"Retry-After": "0"})
        return httpx.Response(201, json=_memory_json(user_id))

    with CognisClient("http://cognis.test", transport=httpx.MockTransport(answer)) as cognis:
        cognis.add_memory(user_id, "Ines keeps bees.")
    assert len(sent) == 2 and sent[0].headers[KEY] == sent[1].headers[KEY]

    def always(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json=limited, headers={"Retry-After": "120"})

    with (
        CognisClient("http://cognis.test", transport=httpx.MockTransport(always)) as cognis,
        pytest.raises(RateLimitedError) as refused,
    ):
        cognis.search(user_id, "bees")  # a wait past the policy's max_delay_s is not made
    assert refused.value.status == 429 and refused.value.retry_after_s == 120
