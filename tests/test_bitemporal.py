"""Bi-temporal history in SQL: what the system knew at T (transaction time) and what was true
in the world at T (event time), through the real API and the functions of 0009."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from tests.factories import create_memory


async def _contents(db, function: str, user_id: str, at: datetime) -> list[str]:
    async with db.connect() as connection:
        rows = await connection.execute(
            text(f"SELECT content FROM {function}(:u, :at)"),  # noqa: S608
            {"u": user_id, "at": at},
        )
        return list(rows.scalars())


def _day(text_date: str) -> datetime:
    return datetime.fromisoformat(text_date).replace(tzinfo=UTC)


async def test_a_backdated_memory_was_true_then_but_not_known_then(client, db, user_id) -> None:
    await create_memory(
        client, user_id, "I adopted a cat named Miso", event_time="2023-04-02T00:00:00Z"
    )
    at = _day("2023-06-01")
    assert await _contents(db, "memories_known_at", user_id, at) == []
    assert await _contents(db, "memories_as_of", user_id, at) == []  # the older name
    assert await _contents(db, "memories_true_at", user_id, at) == ["I adopted a cat named Miso"]
    assert await _contents(db, "memories_true_at", user_id, _day("2023-01-01")) == []
    now = datetime.now(UTC) + timedelta(seconds=1)
    assert await _contents(db, "memories_known_at", user_id, now) == ["I adopted a cat named Miso"]


async def test_a_chain_gives_each_version_its_event_time_interval(client, db, user_id) -> None:
    tokyo = await create_memory(
        client, user_id, "I live in Tokyo", event_time="2020-01-01T00:00:00Z"
    )
    response = await client.patch(
        f"/v1/users/{user_id}/memories/{tokyo['id']}",
        json={"content": "I moved to Osaka", "event_time": "2023-03-01T00:00:00Z"},
    )
    assert response.status_code == 200, response.text
    assert await _contents(db, "memories_true_at", user_id, _day("2021-05-05")) == [
        "I live in Tokyo"
    ]
    assert await _contents(db, "memories_true_at", user_id, _day("2024-05-05")) == [
        "I moved to Osaka"
    ]
    now = datetime.now(UTC) + timedelta(seconds=1)
    # Today the system knows only the current version; in 2021 it knew nothing yet.
    assert await _contents(db, "memories_known_at", user_id, now) == ["I moved to Osaka"]
    assert await _contents(db, "memories_known_at", user_id, _day("2021-05-05")) == []


async def test_a_deleted_fact_stops_being_true_when_the_delete_was_recorded(
    client, db, user_id, other_user_id
) -> None:
    memory = await create_memory(
        client, user_id, "I work at Initech", event_time="2022-01-10T00:00:00Z"
    )
    await create_memory(
        client, other_user_id, "I work at Initech too", event_time="2022-01-10T00:00:00Z"
    )
    deleted = await client.delete(f"/v1/users/{user_id}/memories/{memory['id']}")
    assert deleted.status_code == 200, deleted.text
    assert await _contents(db, "memories_true_at", user_id, _day("2022-06-01")) == [
        "I work at Initech"
    ]
    later = datetime.now(UTC) + timedelta(seconds=1)
    assert await _contents(db, "memories_true_at", user_id, later) == []
    # Each user's question sees only that user's memories.
    assert await _contents(db, "memories_true_at", other_user_id, later) == [
        "I work at Initech too"
    ]


async def test_a_patch_without_event_time_leaves_the_old_version_true_until_it(
    client, db, user_id
) -> None:
    """The new version inherits event_time; it says nothing about when the world changed, so
    the old version holds until the PATCH was recorded (it used to read as never true)."""
    tokyo = await create_memory(
        client, user_id, "I live in Tokyo", event_time="2020-01-01T00:00:00Z"
    )
    response = await client.patch(
        f"/v1/users/{user_id}/memories/{tokyo['id']}", json={"content": "I live in Osaka"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["event_time"].startswith("2020-01-01")  # inherited, as before
    assert await _contents(db, "memories_true_at", user_id, _day("2021-05-05")) == [
        "I live in Tokyo"
    ]
    now = datetime.now(UTC) + timedelta(seconds=1)
    assert await _contents(db, "memories_true_at", user_id, now) == ["I live in Osaka"]


async def test_a_patch_or_delete_may_say_when_the_fact_ended_in_the_world(
    client, db, user_id
) -> None:
    """event_end: the fact ended then (distinct from retracting a wrong memory, and from
    superseded_at, when the system stopped holding the version)."""
    job = await create_memory(
        client, user_id, "I work at Initech", event_time="2022-01-10T00:00:00Z"
    )
    ended = await client.patch(
        f"/v1/users/{user_id}/memories/{job['id']}", json={"event_end": "2024-06-30T00:00:00Z"}
    )
    assert ended.status_code == 200, ended.text
    assert ended.json()["event_end"].startswith("2024-06-30")
    assert ended.json()["event_time"].startswith("2022-01-10")
    assert await _contents(db, "memories_true_at", user_id, _day("2023-01-01")) == [
        "I work at Initech"
    ]
    assert await _contents(db, "memories_true_at", user_id, _day("2024-07-01")) == []

    cat = await create_memory(client, user_id, "I have a cat", event_time="2020-05-01T00:00:00Z")
    wrong = await client.delete(
        f"/v1/users/{user_id}/memories/{cat['id']}", params={"event_end": "2019-01-01T00:00:00Z"}
    )
    assert wrong.status_code == 400, wrong.text
    assert wrong.headers["content-type"].startswith("application/problem+json")
    assert "before event_time" in wrong.json()["detail"]
    gone = await client.delete(
        f"/v1/users/{user_id}/memories/{cat['id']}", params={"event_end": "2025-03-01T00:00:00Z"}
    )
    assert gone.status_code == 200, gone.text
    assert gone.json()["event_end"].startswith("2025-03-01")
    assert "I have a cat" in await _contents(db, "memories_true_at", user_id, _day("2025-01-01"))
    now = datetime.now(UTC) + timedelta(seconds=1)
    # Ended in 2025, not when the delete was recorded: a retraction would still hold until now.
    assert "I have a cat" not in await _contents(
        db, "memories_true_at", user_id, _day("2025-06-01")
    )
    assert await _contents(db, "memories_true_at", user_id, now) == []
    history = await client.get(f"/v1/users/{user_id}/memories/{cat['id']}/history")
    assert [v["event_end"] for v in history.json()["versions"]] == [gone.json()["event_end"]]
    async with db.connect() as connection:
        statuses = (
            await connection.execute(
                text(
                    "SELECT status, event_end IS NOT NULL FROM memory_versions "
                    "WHERE user_id = :u ORDER BY valid_from"
                ),
                {"u": user_id},
            )
        ).all()
    assert statuses == [("updated", False), ("current", True), ("deleted", True)]
