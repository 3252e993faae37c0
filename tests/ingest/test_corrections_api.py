"""Corrections without an LLM through the real HTTP API: the session's plain API (no LLM) and
the scripted LLM's API when its answer falls back. A correction is an UPDATE (a new version,
with its reason in the audit row) that can be undone like any update; a retraction ends the
memory; anything uncertain stays an ADD; another user's or tenant's memory is never touched."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.scripted_llm import Reply, ScriptedLLM
from tests.conftest import ApiProcess, InProcessApi
from tests.ingest.helpers import current_memories, decisions, ingest, message, rows
from tests.tenants.helpers import new_tenant, tenant_client


@pytest.fixture(scope="module")
def corrections_off(migrated: dict[str, str]) -> Iterator[ApiProcess]:
    """An API (with its own workers and queue) whose corrections, and the learned updates
    (tests/ingest/test_supersedes.py), are switched off."""
    env = {
        **migrated,
        "COGNIS_INGEST_CORRECTIONS": "false",
        "COGNIS_INGEST_SUPERSEDES": "false",
        "COGNIS_INGEST_QUEUE": "corrections-off",
    }
    process = ApiProcess(env, "api-corrections-off")
    process.wait_ready()
    yield process
    process.stop()


async def history(client: httpx.AsyncClient, user_id: str, memory_id: str) -> list[dict]:
    response = await client.get(f"/v1/users/{user_id}/memories/{memory_id}/history")
    assert response.status_code == 200, response.text
    return response.json()["versions"]


async def test_a_move_updates_the_home_with_its_reason_and_can_be_undone(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    (home,) = decisions(await ingest(client, user_id, message("I live in Tokyo")))
    await ingest(client, user_id, message("I love sushi"))
    (moved,) = decisions(await ingest(client, user_id, message("I moved to Osaka last month")))
    assert moved["operation"] == "UPDATE" and moved["extractor"] == "deterministic"
    assert moved["target_memory_id"] == home["memory_id"]
    assert moved["reason"].startswith("correction without an LLM: rule 'moved to', cosine 0.")
    (audit,) = await rows(
        db,
        "SELECT operation, reason FROM ingest_decisions WHERE memory_id = :m AND user_id = :u",
        m=moved["memory_id"],
        u=user_id,
    )
    assert audit["operation"] == "UPDATE" and audit["reason"] == moved["reason"]
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == ["I love sushi", "I moved to Osaka last month"]
    versions = await history(client, user_id, moved["memory_id"])
    assert [v["content"] for v in versions] == ["I live in Tokyo", "I moved to Osaka last month"]

    # Undone as any update is: the previous content becomes a new current version.
    undone = await client.patch(
        f"/v1/users/{user_id}/memories/{moved['memory_id']}", json={"content": "I live in Tokyo"}
    )
    assert undone.status_code == 200, undone.text
    versions = await history(client, user_id, moved["memory_id"])
    assert [v["content"] for v in versions] == [
        "I live in Tokyo",
        "I moved to Osaka last month",
        "I live in Tokyo",
    ]
    assert [v["is_current"] for v in versions] == [False, False, True]


async def test_forget_that_ends_the_memory_without_removing_it(
    client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    (added,) = decisions(await ingest(client, user_id, message("I'm vegetarian")))
    job = await ingest(client, user_id, message("Please forget that I'm vegetarian"))
    (deleted,) = decisions(job)
    assert deleted["operation"] == "DELETE"
    assert deleted["target_memory_id"] == added["memory_id"]
    assert "rule 'forget that'" in deleted["reason"]
    assert await current_memories(client, user_id) == []
    (row,) = await rows(
        db,
        "SELECT content, status FROM memory_versions WHERE id = :id AND user_id = :u",
        id=added["memory_id"],
        u=user_id,
    )
    assert row["content"] == "I'm vegetarian" and row["status"] == "deleted"


@pytest.mark.parametrize(
    "text",
    ["I moved the meeting to Friday", "Actually I love it!", "Do you remember where I live?"],
)
async def test_an_uncertain_message_changes_nothing_it_might_be_about(
    client: httpx.AsyncClient, user_id: str, text: str
) -> None:
    """No correction: the message is a new fact (ADD) or, the fact model judging it no fact
    ("Do you remember where I live?"), stays in the message (NONE); the memory stays as it was."""
    (home,) = decisions(await ingest(client, user_id, message("I live in Tokyo")))
    (decision,) = decisions(await ingest(client, user_id, message(text)))
    assert decision["operation"] in ("ADD", "NONE") and decision["target_memory_id"] is None
    added = [text] if decision["operation"] == "ADD" else []
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == sorted(["I live in Tokyo", *added])
    assert len(await history(client, user_id, home["memory_id"])) == 1


async def test_another_speakers_memory_is_not_corrected(
    client: httpx.AsyncClient, user_id: str
) -> None:
    """One user's conversation between two people: Ben's move is not Ana's."""
    (home,) = decisions(await ingest(client, user_id, message("I live in Tokyo", speaker="Ana")))
    (moved,) = decisions(await ingest(client, user_id, message("I moved to Osaka", speaker="Ben")))
    assert moved["operation"] == "ADD"
    (own,) = decisions(await ingest(client, user_id, message("I now live in Kyoto", speaker="Ana")))
    assert own["operation"] == "UPDATE" and own["target_memory_id"] == home["memory_id"]


async def test_a_dry_run_shows_the_correction_and_changes_nothing(
    client: httpx.AsyncClient, user_id: str
) -> None:
    (home,) = decisions(await ingest(client, user_id, message("I live in Tokyo")))
    response = await client.post(
        f"/v1/users/{user_id}/messages",
        params={"dry_run": "true"},
        json={"messages": [message("I now live in Kyoto")]},
    )
    assert response.status_code == 200, response.text
    (result,) = response.json()["messages"]
    (decision,) = result["decisions"]
    assert decision["operation"] == "UPDATE" and decision["memory_id"] is None
    assert decision["target_memory_id"] == home["memory_id"]
    assert decision["content"] == "I now live in Kyoto"  # as said, never an edited copy
    assert "rule 'now'" in decision["reason"]
    (current,) = await current_memories(client, user_id)
    assert current["id"] == home["memory_id"] and current["content"] == "I live in Tokyo"


async def test_a_correction_never_touches_another_users_memory(
    client: httpx.AsyncClient, user_id: str, other_user_id: str
) -> None:
    (theirs,) = decisions(await ingest(client, other_user_id, message("I live in Tokyo")))
    (decision,) = decisions(await ingest(client, user_id, message("I moved to Osaka")))
    assert decision["operation"] == "ADD" and decision["target_memory_id"] is None
    (retraction,) = decisions(await ingest(client, user_id, message("I no longer live in Tokyo")))
    # Nothing of this user's to end: a new fact, or (judged no fact) nothing at all.
    assert retraction["operation"] in ("ADD", "NONE") and retraction["target_memory_id"] is None
    (kept,) = await current_memories(client, other_user_id)
    assert kept["id"] == theirs["memory_id"] and kept["content"] == "I live in Tokyo"
    assert len(await history(client, other_user_id, theirs["memory_id"])) == 1


async def test_a_correction_never_touches_another_tenants_memory(
    admin: httpx.AsyncClient, inprocess_api: InProcessApi, ingest_worker: None
) -> None:
    first, second = await new_tenant(admin, "home"), await new_tenant(admin, "away")
    user = "same-user"
    async with (
        tenant_client(inprocess_api, first.key) as one,
        tenant_client(inprocess_api, second.key) as two,
    ):
        (home,) = decisions(await ingest(one, user, message("I live in Tokyo")))
        (decision,) = decisions(await ingest(two, user, message("I moved to Osaka")))
        assert decision["operation"] == "ADD"
        (forget,) = decisions(await ingest(two, user, message("Forget that I live in Tokyo")))
        # A request with nothing of this tenant's to end: it stays in the message.
        assert forget["operation"] == "NONE" and forget["target_memory_id"] is None
        (kept,) = await current_memories(one, user)
        assert kept["id"] == home["memory_id"] and kept["content"] == "I live in Tokyo"
        # In its own tenant the same message is a correction.
        (moved,) = decisions(await ingest(one, user, message("I moved to Osaka")))
        assert moved["operation"] == "UPDATE" and moved["target_memory_id"] == home["memory_id"]


async def test_when_the_llm_answer_falls_back_the_correction_still_applies(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    llm.script(
        "I live in Lisbon",
        Reply.ops({"op": "ADD", "content": "I live in Lisbon", "category": "personal_details"}),
    )
    llm.script("I moved to Porto", Reply("not json"), Reply("still not json"))
    (home,) = decisions(await ingest(llm_client, user_id, message("I live in Lisbon")))
    (moved,) = decisions(await ingest(llm_client, user_id, message("I moved to Porto")))
    assert moved["fallback_used"] is True and moved["extractor"] == "deterministic"
    assert moved["operation"] == "UPDATE" and moved["target_memory_id"] == home["memory_id"]
    (current,) = await current_memories(llm_client, user_id)
    assert current["content"] == "I moved to Porto"


async def test_switched_off_every_message_is_an_add_again(
    corrections_off: ApiProcess, user_id: str
) -> None:
    async with corrections_off.client() as http:
        await ingest(http, user_id, message("I live in Tokyo"))
        (moved,) = decisions(await ingest(http, user_id, message("I moved to Osaka")))
        assert moved["operation"] == "ADD" and moved["target_memory_id"] is None
        contents = sorted(m["content"] for m in await current_memories(http, user_id))
        assert contents == ["I live in Tokyo", "I moved to Osaka"]
