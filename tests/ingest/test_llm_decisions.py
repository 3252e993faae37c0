"""Ingestion with an LLM (the scripted server): UPDATE chains, NONE, DELETE, ordering, isolation."""

from __future__ import annotations

import asyncio
import re

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.scripted_llm import Reply, ScriptedLLM
from tests.ingest.helpers import current_memories, decisions, ingest, message, rows, wait_job


async def test_tokyo_then_osaka_is_an_update_with_a_version_chain(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    llm.script(
        "I live in Tokyo",
        Reply.ops({"op": "ADD", "content": "Lives in Tokyo", "category": "personal_details"}),
    )
    llm.script(
        "I moved to Osaka",
        Reply.ops({"op": "UPDATE", "target": "m1", "content": "Lives in Osaka"}),
    )
    first = await ingest(llm_client, user_id, message("I live in Tokyo", "2023-04-01T10:00:00Z"))
    second = await ingest(llm_client, user_id, message("I moved to Osaka", "2023-05-08T10:00:00Z"))
    (added,) = decisions(first)
    (updated,) = decisions(second)
    assert added["operation"] == "ADD" and added["extractor"] == "llm"
    assert added["model"] == llm.model and len(added["raw_answer_sha256"]) == 64
    assert updated["operation"] == "UPDATE"
    assert updated["target_memory_id"] == added["memory_id"]

    (current,) = await current_memories(llm_client, user_id)
    # Decisions name versions; the memory keeps its id.
    assert current["version_id"] == updated["memory_id"] and current["content"] == "Lives in Osaka"
    assert current["id"] == added["memory_id"]
    # The answer named no category: the memory kept its own.
    assert current["category"] == "personal_details"
    history = await llm_client.get(f"/v1/users/{user_id}/memories/{current['id']}/history")
    versions = history.json()["versions"]
    assert [v["content"] for v in versions] == ["Lives in Tokyo", "Lives in Osaka"]
    assert versions[0]["is_current"] is False and versions[0]["superseded_at"] is not None
    assert versions[1]["replaces_id"] == versions[0]["id"]
    chain = await rows(
        db, "SELECT content, version FROM memory_chain(:id) ORDER BY version", id=current["id"]
    )
    assert [(r["content"], r["version"]) for r in chain] == [
        ("Lives in Tokyo", 1),
        ("Lives in Osaka", 2),
    ]
    # The LLM saw Tokyo as candidate m1 when it decided about Osaka.
    (osaka_prompt,) = llm.requests_for("I moved to Osaka")
    assert "[m1]" in osaka_prompt.text and "Lives in Tokyo" in osaka_prompt.text


async def test_a_repeated_fact_is_none(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    llm.script(
        "I have a dog named Rex",
        Reply.ops({"op": "ADD", "content": "Has a dog named Rex", "category": "relationships"}),
        Reply.ops({"op": "NONE", "target": "m1", "reason": "already known"}),
    )
    first = await ingest(llm_client, user_id, message("I have a dog named Rex"))
    second = await ingest(llm_client, user_id, message("I have a dog named Rex"))
    (none,) = decisions(second)
    assert none["operation"] == "NONE" and none["memory_id"] is None
    assert none["target_memory_id"] == decisions(first)[0]["memory_id"]
    assert len(await current_memories(llm_client, user_id)) == 1


async def test_forget_that_i_am_vegetarian_ends_the_memory_without_removing_it(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    # Rules are tried in order: the more specific one first.
    llm.script(
        "forget that I'm vegetarian",
        Reply.ops({"op": "DELETE", "target": "m1", "reason": "the user asked to forget it"}),
    )
    llm.script(
        "I'm vegetarian",
        Reply.ops({"op": "ADD", "content": "Is vegetarian", "category": "dietary"}),
    )
    added = decisions(await ingest(llm_client, user_id, message("I'm vegetarian")))[0]
    job = await ingest(llm_client, user_id, message("Please forget that I'm vegetarian"))
    (deleted,) = decisions(job)
    assert deleted["operation"] == "DELETE"
    assert deleted["target_memory_id"] == added["memory_id"]
    assert deleted["reason"] == "the user asked to forget it"
    assert await current_memories(llm_client, user_id) == []
    (row,) = await rows(
        db,
        "SELECT content, status FROM memory_versions WHERE id = :id AND user_id = :u",
        id=added["memory_id"],
        u=user_id,
    )
    assert row["content"] == "Is vegetarian" and row["status"] == "deleted"


async def _hold(db: AsyncEngine, job_id: str) -> None:
    """Keep a just-submitted job from being taken (it is still inside its settle window)."""
    async with db.begin() as connection:
        held = await connection.execute(
            text(
                "UPDATE ingest_tasks SET available_at = now() + interval '1 hour' "
                "WHERE job_id = :j AND state = 'queued'"
            ),
            {"j": job_id},
        )
    assert held.rowcount == 1  # type: ignore[attr-defined]


async def test_messages_arriving_out_of_order_apply_in_timestamp_order(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, db: AsyncEngine, user_id: str
) -> None:
    """The later message arrives first, in its own request; when both are due together the
    worker must still apply the earlier one first. (The jobs are held and then released at
    once, so the test does not depend on how fast this machine is.)"""
    llm.script(
        "I live in Lisbon",
        Reply.ops({"op": "ADD", "content": "Lives in Lisbon", "category": "personal_details"}),
    )
    llm.script(
        "I moved to Porto",
        Reply.ops({"op": "UPDATE", "target": "m1", "content": "Lives in Porto"}),
    )
    late = await ingest(
        llm_client, user_id, message("I moved to Porto", "2023-05-08T10:00:00Z"), wait=False
    )
    await _hold(db, late["job_id"])
    early = await ingest(
        llm_client, user_id, message("I live in Lisbon", "2023-04-01T10:00:00Z"), wait=False
    )
    await _hold(db, early["job_id"])
    async with db.begin() as connection:
        await connection.execute(
            text("UPDATE ingest_tasks SET available_at = now() WHERE user_id = :u"),
            {"u": user_id},
        )
    late_job, early_job = await asyncio.gather(
        wait_job(llm_client, user_id, late["job_id"]),
        wait_job(llm_client, user_id, early["job_id"]),
    )
    assert decisions(early_job)[0]["operation"] == "ADD"
    assert decisions(late_job)[0]["operation"] == "UPDATE"
    (current,) = await current_memories(llm_client, user_id)
    assert current["content"] == "Lives in Porto"
    (lisbon_prompt,) = llm.requests_for("I live in Lisbon")
    assert "[m1]" not in lisbon_prompt.text  # nothing existed yet when it was decided


async def test_relative_dates_resolve_against_the_message_time(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    llm.script(
        "yesterday",
        Reply.ops({"op": "ADD", "content": "Adopted a kitten", "category": "relationships"}),
    )
    await ingest(
        llm_client, user_id, message("I adopted a kitten yesterday", "2023-05-08T20:00:00Z")
    )
    (memory,) = await current_memories(llm_client, user_id)
    assert memory["event_time"].startswith("2023-05-07T00:00:00")
    (request,) = llm.requests_for("I adopted a kitten yesterday")
    assert '"yesterday" = 2023-05-07' in request.text  # the LLM is told what it means


async def test_no_other_users_memory_ever_reaches_the_prompt(
    llm: ScriptedLLM,
    llm_client: httpx.AsyncClient,
    user_id: str,
    other_user_id: str,
) -> None:
    llm.script(
        "I love hiking in the Alps",
        Reply.ops({"op": "ADD", "content": "Loves hiking in the Alps", "category": "hobbies"}),
    )
    llm.script(
        "mountain hiking",
        Reply.ops({"op": "ADD", "content": "Enjoys mountain hiking", "category": "hobbies"}),
    )
    theirs = await ingest(llm_client, other_user_id, message("I love hiking in the Alps"))
    their_id = decisions(theirs)[0]["memory_id"]
    mine = await ingest(llm_client, user_id, message("I really enjoy mountain hiking"))
    # Mine was decided with no candidates although a very similar memory exists for them.
    (request,) = llm.requests_for("I really enjoy mountain hiking")
    assert "Alps" not in request.text and their_id not in request.text
    assert "[m1]" not in request.text
    assert decisions(mine)[0]["operation"] == "ADD"
    # And the LLM cannot reach it by naming its id either.
    llm.script(
        "Forget my hiking",
        Reply.ops({"op": "DELETE", "target": their_id, "reason": "asked"}),
    )
    job = await ingest(llm_client, user_id, message("Forget my hiking hobby"))
    assert all(d["operation"] != "DELETE" for d in decisions(job))
    assert decisions(job)[0]["fallback_used"] is True
    assert len(await current_memories(llm_client, other_user_id)) == 1


async def test_an_update_whose_target_was_edited_meanwhile_is_decided_again(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    # The answer about the move comes late (within the LLM timeout); meanwhile the user's app
    # edits the memory it will name, so the version the first decision names is no longer
    # current when it would be applied. The edit must land inside that second: a machine too
    # busy for that gets another try with a user of its own.
    for attempt in range(3):
        user = f"{user_id}-{attempt}"
        llm.script(
            f"I live in Kyoto ({attempt})",
            Reply.ops({"op": "ADD", "content": "Lives in Kyoto", "category": "personal_details"}),
        )
        first = await ingest(llm_client, user, message(f"I live in Kyoto ({attempt})"))
        (added,) = decisions(first)
        moved = f"I moved to Nara ({attempt})"
        update = {"op": "UPDATE", "target": "m1", "content": "Lives in Nara"}
        llm.script(moved, Reply.ops(update, delay_s=1.5), Reply.ops(update))
        job = await ingest(llm_client, user, message(moved), wait=False)
        for _ in range(600):
            if llm.requests_for(moved):
                break
            await asyncio.sleep(0.02)
        # A metadata edit of the version the decision names: a new version at once, with no
        # model work (If-Match: refused, not applied on top, if the decision wins the race).
        edited = await llm_client.patch(
            f"/v1/users/{user}/memories/{added['memory_id']}",
            json={"metadata": {"neighbourhood": "Gion"}},
            headers={"If-Match": added["memory_id"]},
        )
        done = await wait_job(llm_client, user, job["job_id"])
        if edited.status_code == 200:
            break
        assert edited.status_code == 412, edited.text  # the decision was applied first
    assert edited.status_code == 200, "the edit never landed before the late answer"

    assert done["state"] == "done", done
    (task,) = done["messages"]
    assert task["attempts"] == 1, task  # decided again at once, not failed and retried
    assert len(llm.requests_for(moved)) == 2
    (updated,) = decisions(done)
    assert updated["operation"] == "UPDATE"
    assert updated["target_memory_id"] == edited.json()["version_id"]
    history = await llm_client.get(f"/v1/users/{user}/memories/{updated['memory_id']}/history")
    versions = history.json()["versions"]
    assert [(v["content"], v["metadata"]) for v in versions] == [
        ("Lives in Kyoto", {}),
        ("Lives in Kyoto", {"neighbourhood": "Gion"}),
        ("Lives in Nara", {"neighbourhood": "Gion"}),
    ]


async def test_an_llm_update_the_supersedes_model_rules_out_is_added_beside_the_memory(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    """Precision first: the scripted LLM over-updates (a brother's visit 'replaces' the sister
    the user has), the learned model scores that pair far below the floor, so the fact is
    added beside the sister, who stays current; a real move of the same user still chains."""
    llm.script(
        "I have a sister named Ana",
        Reply.ops(
            {"op": "ADD", "content": "I have a sister named Ana", "category": "relationships"}
        ),
    )
    llm.script(
        "My brother Luis is visiting",
        Reply.ops({"op": "UPDATE", "target": "m1", "content": "My brother Luis is visiting"}),
    )
    llm.script(
        "I live in Tokyo",
        Reply.ops({"op": "ADD", "content": "I live in Tokyo", "category": "personal_details"}),
    )
    llm.script(
        "I moved to Osaka",
        Reply.ops({"op": "UPDATE", "target": "m1", "content": "I live in Osaka"}),
    )
    vetoed_before = await _vetoed(llm_client)
    await ingest(llm_client, user_id, message("I have a sister named Ana"))
    visit = await ingest(llm_client, user_id, message("My brother Luis is visiting"))
    (kept,) = decisions(visit)
    assert kept["operation"] == "ADD" and kept["extractor"] == "llm"
    assert kept["target_memory_id"] is None
    assert "UPDATE of m1 made an ADD beside it: supersedes score" in kept["reason"]
    contents = sorted(m["content"] for m in await current_memories(llm_client, user_id))
    assert contents == ["I have a sister named Ana", "My brother Luis is visiting"]

    other = f"{user_id}-moves"
    await ingest(llm_client, other, message("I live in Tokyo"))
    moved = await ingest(llm_client, other, message("I moved to Osaka"))
    (updated,) = decisions(moved)
    assert updated["operation"] == "UPDATE" and updated["target_memory_id"] is not None
    assert [m["content"] for m in await current_memories(llm_client, other)] == ["I live in Osaka"]
    assert await _vetoed(llm_client) == vetoed_before + 1


async def _vetoed(client: httpx.AsyncClient) -> float:
    metrics = (await client.get("/metrics")).text
    found = re.search(r"^cognis_ingest_llm_updates_vetoed_total (\S+)$", metrics, re.MULTILINE)
    assert found, "the counter is exported"
    return float(found.group(1))
