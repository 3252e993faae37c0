"""mem0's client against an API that cannot keep up: a message whose processing is still
queued when the add stops waiting, a write refused for load, and a delete_all that must also
stop what is queued. The API here has no ingestion worker of its own, on a queue no other
process serves, and waits one second for a job: every add with infer is still queued when it
answers, as on a machine whose workers are behind."""

from __future__ import annotations

import os

# Before mem0 is imported: its telemetry would try the network.
os.environ["MEM0_TELEMETRY"] = "false"

from collections.abc import Iterator

import httpx
import pytest
from mem0 import MemoryClient
from mem0.exceptions import RateLimitError

from tests.compat.clients import mem0_of, native_of
from tests.conftest import API_KEY, ApiProcess


@pytest.fixture(scope="module")
def behind(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_INGEST_WORKER_IN_API": "false",
        "COGNIS_INGEST_QUEUE": "mem0-behind",
        "COGNIS_INGEST_WAIT_TIMEOUT_S": "1",
        "COGNIS_RELAY_IN_API": "false",
    }
    process = ApiProcess(env, "api-mem0-behind")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
def mem0(behind: ApiProcess) -> Iterator[MemoryClient]:
    with mem0_of(behind) as client:
        yield client


@pytest.fixture
def native(behind: ApiProcess) -> Iterator[httpx.Client]:
    with native_of(behind) as http:
        yield http


def _job(native: httpx.Client, user_id: str, event_id: str) -> dict:
    response = native.get(f"/v1/users/{user_id}/jobs/{event_id}")
    assert response.status_code == 200, response.text
    return response.json()


def test_an_add_still_queued_answers_its_pending_event_with_202(
    behind: ApiProcess, mem0: MemoryClient, native: httpx.Client, user_id: str
) -> None:
    added = mem0.add("I moved to Lisbon last year.", user_id=user_id)
    (event,) = added["results"]  # never {"results": []}
    assert event["status"] == "PENDING" and event["message"]
    assert _job(native, user_id, event["event_id"])["state"] == "queued"
    raw = native.post(
        "/v3/memories/add/",
        json={"messages": [{"role": "user", "content": "I adopted a cat."}], "user_id": user_id},
    )
    assert raw.status_code == 202
    assert [e["status"] for e in raw.json()["results"]] == ["PENDING"]


def test_delete_all_cancels_the_users_queued_messages(
    mem0: MemoryClient, native: httpx.Client, user_id: str, other_user_id: str
) -> None:
    mine = mem0.add("I play the cello every Sunday.", user_id=user_id)["results"][0]
    of_a_run = mem0.add("I booked seat 12A.", user_id=user_id, run_id="trip-1")["results"][0]
    theirs = mem0.add("I play the drums.", user_id=other_user_id)["results"][0]

    by_run = mem0.delete_all(user_id=user_id, run_id="trip-1")
    assert by_run["cancelled_messages"] == 1
    assert _job(native, user_id, of_a_run["event_id"])["state"] == "failed"
    assert _job(native, user_id, mine["event_id"])["state"] == "queued"

    everything = mem0.delete_all(user_id=user_id)
    assert everything["cancelled_messages"] == 1
    assert _job(native, user_id, mine["event_id"])["state"] == "failed"
    # Failed for good: no worker takes it again, so no memory comes from it later.
    assert _job(native, other_user_id, theirs["event_id"])["state"] == "queued"


def test_a_write_refused_for_load_is_a_429_with_retry_after_that_mem0_surfaces(
    behind: ApiProcess, mem0: MemoryClient, user_id: str
) -> None:
    # A 1 ms deadline (the client's X-Cognis-Deadline-Ms) passes before any model work: the
    # refusal a busy model gives once the server's own deadline has passed.
    impatient = httpx.Client(headers={"X-Cognis-Deadline-Ms": "1"}, timeout=60)
    client = MemoryClient(api_key=API_KEY, host=behind.url, client=impatient)
    try:
        with pytest.raises(RateLimitError) as refused:
            client.add("Ines lives in Tokyo.", user_id=user_id, infer=False)
    finally:
        impatient.close()
    assert refused.value.debug_info["retry_after"] > 0
    assert "deadline" in refused.value.message
    assert mem0.get_all(filters={"user_id": user_id})["count"] == 0  # nothing written
