"""Backpressure through the real API (issue 56, item 2): a message the workers could not apply
within COGNIS_INGEST_MAX_WAIT_S is refused at once with 429 + Retry-After and nothing stored,
instead of being accepted into minutes of lag; once the backlog drains, it is accepted."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from app.ingest.backlog import WINDOW_S, Backlog
from tests.ingest.helpers import decisions, ingest, message

BOUND_S = 5.0
STORED = text("SELECT count(*) FROM messages WHERE user_id = :u")


@pytest.fixture
def bounded(inprocess_api, monkeypatch) -> str:
    """The in-process API on a queue of this test's own (no worker takes its tasks) with a
    bound of BOUND_S; the queue's name."""
    ingest = inprocess_api.app.state.runtime.settings.ingest
    queue = f"backpressure-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(ingest, "ingest_queue", queue)
    monkeypatch.setattr(ingest, "ingest_max_wait_s", BOUND_S)
    return queue


async def send(client, user_id: str, content: str):
    return await client.post(
        f"/v1/users/{user_id}/messages",
        params={"wait": "false"},
        json={"messages": [message(content)]},
    )


async def test_a_backlog_past_the_bound_refuses_messages_with_retry_after_and_stores_nothing(
    client, db, bounded, user_id, other_user_id
) -> None:
    first = await send(client, user_id, "I live in Porto.")
    assert first.status_code == 202, first.text  # an empty queue: no wait
    # The queue's oldest message has now waited 40 s with nothing applied: workers behind.
    async with db.begin() as connection:
        await connection.execute(
            text(
                "UPDATE ingest_tasks SET created_at = now() - interval '40 seconds' "
                "WHERE queue = :q"
            ),
            {"q": bounded},
        )
        before = (await connection.execute(STORED, {"u": other_user_id})).scalar_one()

    refused = await send(client, other_user_id, "I work as a baker.")

    assert refused.status_code == 429, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert "COGNIS_INGEST_MAX_WAIT_S" in problem["detail"]
    assert problem["expected_wait_s"] >= 40
    # Back within the bound after about 40 - 5 s.
    assert 30 <= int(refused.headers["retry-after"]) <= 40
    async with db.connect() as connection:
        assert (await connection.execute(STORED, {"u": other_user_id})).scalar_one() == before

    # The backlog applied (as a worker finishes it), the same message is accepted.
    async with db.begin() as connection:
        await connection.execute(
            text(
                "UPDATE ingest_tasks SET state = 'done', finished_at = now(), lease_token = NULL "
                "WHERE queue = :q"
            ),
            {"q": bounded},
        )
    accepted = await send(client, other_user_id, "I work as a baker.")
    assert accepted.status_code == 202, accepted.text


async def test_a_queue_that_keeps_up_accepts_every_message_and_applies_it(
    client, ingest_worker, bounded, user_id
) -> None:
    """With a worker on the queue (the session's, which reads the queue's name at each
    claim), messages sent one after another are all accepted and applied: the bound refuses
    lag, not traffic."""
    for fact in ("I live in Porto.", "I work as a baker.", "I have a cat named Miso."):
        job = await ingest(client, user_id, message(fact))  # 200, done
        assert [d["operation"] for d in decisions(job)] == ["ADD"], job


def test_the_expected_wait_is_the_oldest_wait_or_the_drain_time_whichever_is_longer() -> None:
    assert Backlog(open=0, oldest_s=0.0, applied=0).expected_wait_s() == 0.0
    # Nothing applied in the window: a first long message is not a stall, its age decides.
    assert Backlog(open=3, oldest_s=2.0, applied=0).expected_wait_s() == 2.0
    # 120 waiting at 60 a minute: two minutes to drain, although the oldest is fresh.
    assert Backlog(open=120, oldest_s=1.0, applied=60).expected_wait_s() == 2 * WINDOW_S
    assert Backlog(open=10, oldest_s=90.0, applied=60).expected_wait_s() == 90.0
