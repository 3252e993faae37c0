"""Japanese updates without an LLM (issue 40): the Japanese supersedes model
(app/ingest/supersedes_ja.py) over the multilingual vectors. Its precision and recall on the
Japanese held-out split, computed here from the data and the shipped weights with the service's
own multilingual encoder; and through the real HTTP API (no LLM configured): a Japanese update
of each of six kinds becomes a new version of the fact it replaces, Japanese additions that look
like updates stay ADDs, a Japanese message of two facts updates one and keeps the other, the
memory a message changes is judged even where the 768D search does not show it, and with an LLM
(the scripted server) an UPDATE of someone else's fact is made an ADD beside the memory."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
import pytest

from app.config import IngestSettings
from app.ingest.candidates import similar_memories
from app.ingest.domain import MessageContext
from app.ingest.pipeline import IngestPipeline
from app.ingest.supersedes import message_sentences, model_for, shipped_model
from app.ingest.supersedes_ja import matched_cues
from app.memories.repository import MemoryRepository
from bench.scripted_llm import Reply, ScriptedLLM
from bench.supersedes import heldout_scores, multilingual_embed
from tests.conftest import InProcessApi
from tests.ingest.helpers import current_memories, decisions, ingest, message
from tests.ingest.test_supersedes import history

# Measured in docs/benchmarks/supersedes.md, "Japanese": precision 1.000 (31/31), recall 0.795
# (31/39). Precision must stay at issue 39's target; recall may lose one case (0.769).
HELDOUT_PRECISION = 0.95
HELDOUT_RECALL = 0.76
# The decision's reason: the score, the features that pushed it up, the cues the sentence said.
SUPERSEDES_REASON = r"supersedes without an LLM: score [01]\.\d{3} >= 0\.720 \(\w+ .*; cues \S"


def test_the_setting_defaults_to_the_shipped_threshold() -> None:
    model = shipped_model("ja")
    assert IngestSettings().ingest_supersedes_threshold_ja == model.threshold
    assert model.language == "ja" and model.direction.shape == (512,)


def test_a_japanese_message_is_judged_by_the_japanese_model() -> None:
    assert model_for("転職して今は出版社にいます").language == "ja"
    assert model_for("I moved to Leeds last spring").language == "en"


def test_japanese_sentences_split_at_the_full_stop_and_english_ones_as_before() -> None:
    # a full-width exclamation mark ends a sentence too
    assert message_sentences("郵便局を辞めました。来週、弟が結婚します\uff01") == [
        "郵便局を辞めました。",
        "来週、弟が結婚します\uff01",
    ]
    english = "I left the quartet and play in the city orchestra now. My niece was born."
    assert message_sentences(english) == [
        "I left the quartet and play in the city orchestra now.",
        "My niece was born.",
    ]
    assert matched_cues("ジムを退会して、今は家で走っています") == ["退会", "今は"]


async def test_heldout_precision_and_recall_reach_the_documented_figures(
    inprocess_api: InProcessApi,
) -> None:
    encoder = inprocess_api.app.state.runtime.embedder.multilingual
    assert encoder is not None, "the multilingual embedder is on by default"
    shown, scores = await heldout_scores(multilingual_embed(encoder), shipped_model("ja"))
    assert len(shown) >= 60 and scores.expected >= 35
    assert scores.precision >= HELDOUT_PRECISION, scores.line()
    assert scores.recall >= HELDOUT_RECALL, scores.line()


# Six kinds of everyday change, each after an unrelated earlier fact of the same user.
KINDS = {
    "home": ("松江に住んでいます", "去年の夏、松江から米子に引っ越しました"),
    "job": ("市立図書館で司書をしています", "図書館を辞めて、今は本屋の店長をしています"),
    "manager": ("上司は大野さんです", "大野さんが転勤になり、新しい上司は今井さんです"),
    "appointment": (
        "整体の予約は水曜日の18時です",
        "整体の予約を金曜日の19時に変更しました",
    ),
    "tool": ("家計の管理はエクセルでしています", "エクセルはやめて、家計簿アプリに切り替えました"),
    "health": (
        "毎晩睡眠薬を飲んでいます",
        "よく眠れるようになったので、睡眠薬はもう飲んでいません",
    ),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_japanese_update_becomes_a_new_version_of_the_fact_it_replaces(
    client: httpx.AsyncClient, user_id: str, kind: str
) -> None:
    earlier, update_text = KINDS[kind]
    (old,) = decisions(await ingest(client, user_id, message(earlier)))
    await ingest(client, user_id, message("休みの日は川で釣りをします"))
    assert old["operation"] == "ADD"
    (update,) = decisions(await ingest(client, user_id, message(update_text)))
    assert update["operation"] == "UPDATE" and update["extractor"] == "deterministic", update
    assert update["target_memory_id"] == old["memory_id"]
    assert re.match(SUPERSEDES_REASON, update["reason"]), update["reason"]
    versions = await history(client, user_id, update["memory_id"])
    assert [v["content"] for v in versions] == [earlier, update_text]
    assert versions[1]["replaces_id"] == old["memory_id"]
    assert [v["is_current"] for v in versions] == [False, True]
    assert versions[1]["language"] == "ja"
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == sorted([update_text, "休みの日は川で釣りをします"])


@pytest.mark.parametrize(
    ("earlier", "addition"),
    [
        ("ハリネズミを飼っています", "ハリネズミをもう一匹飼い始めました"),
        ("高松に住んでいます", "同僚が高松から岡山に引っ越しました"),
        ("ヨガ教室に通っています", "ヨガ教室の先生が来月結婚するそうです"),
    ],
)
async def test_a_japanese_addition_that_looks_like_an_update_stays_an_add(
    client: httpx.AsyncClient, user_id: str, earlier: str, addition: str
) -> None:
    (first,) = decisions(await ingest(client, user_id, message(earlier)))
    await ingest(client, user_id, message("休みの日は川で釣りをします"))
    (added,) = decisions(await ingest(client, user_id, message(addition)))
    assert added["operation"] == "ADD" and added["target_memory_id"] is None, added
    assert len(await history(client, user_id, first["memory_id"])) == 1
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == sorted([earlier, "休みの日は川で釣りをします", addition])


async def test_a_japanese_message_of_two_facts_updates_one_and_keeps_the_other(
    client: httpx.AsyncClient, user_id: str
) -> None:
    (mechanic,) = decisions(await ingest(client, user_id, message("自動車の整備士をしています")))
    await ingest(client, user_id, message("好きな食べ物はうどんです"))
    text = "整備士を辞めて、今はバスの運転手をしています。来月、姉が結婚します。"
    update, addition = decisions(await ingest(client, user_id, message(text)))
    assert update["operation"] == "UPDATE", update
    assert update["target_memory_id"] == mechanic["memory_id"]
    assert update["content"] == "整備士を辞めて、今はバスの運転手をしています。"
    assert addition["operation"] == "ADD" and addition["target_memory_id"] is None
    assert addition["content"] == "来月、姉が結婚します。"
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == sorted(
        [
            "整備士を辞めて、今はバスの運転手をしています。",
            "来月、姉が結婚します。",
            "好きな食べ物はうどんです",
        ]
    )


async def test_a_japanese_update_finds_its_memory_beyond_the_768d_candidates(
    inprocess_api: InProcessApi, client: httpx.AsyncClient, user_id: str
) -> None:
    """The 768D search reads English: among Japanese memories it may not show the one a
    message changes. The Japanese model also judges each sentence's nearest memories by
    multilingual cosine, so the update still finds it."""
    runtime = inprocess_api.app.state.runtime
    # The first two share characters with the message (図書, 書): all-mpnet-base-v2 puts them
    # nearer it than the memory it changes; the multilingual vectors do not.
    for text in (
        "図書券を集めています",
        "市の書道教室に通っています",
        "市立図書館で司書をしています",
    ):
        await ingest(client, user_id, message(text))
    settings = runtime.settings.model_copy(update={"ingest_candidates": 2})
    pipeline = IngestPipeline(
        runtime.background_sessionmaker,
        runtime.embedder,
        runtime.classifier,
        None,
        api=settings.api,
        embedding=settings.embedding,
        ingest=settings.ingest,
        retrieval=settings.retrieval,
    )
    context = MessageContext(
        user_id=user_id,
        message_id=None,
        content="図書館を辞めて、今は本屋の店長をしています",
        role="user",
        speaker=None,
        session_id=None,
        sent_at=datetime.now(UTC),
        scope=None,
        windows=[],
    )
    (embedding,) = await pipeline.embed([context.content], user_id)
    async with runtime.background_sessionmaker() as session:
        shown = await similar_memories(
            MemoryRepository(session), context, embedding, settings.ingest, settings.retrieval
        )
    assert "市立図書館で司書をしています" not in [c.content for c in shown], "768D found it"
    decided = await pipeline.decide_alone(context)
    (update,) = [op for op in decided.extraction.operations if op.op == "UPDATE"]
    assert update.target is not None and update.target.content == "市立図書館で司書をしています"
    assert update.target.ref == "m3"


async def test_an_llm_update_of_someone_elses_japanese_fact_is_added_beside_the_memory(
    llm: ScriptedLLM, llm_client: httpx.AsyncClient, user_id: str
) -> None:
    """With an LLM: its prompt asks for memories in the message's language, and its UPDATE of
    the user's home by a colleague's move (the Japanese model rules that pair out) is made an
    ADD beside it, the home kept current (precision first)."""
    colleague = "同僚が高松から岡山に引っ越しました"
    llm.script(
        "高松に住んでいます",
        Reply.ops({"op": "ADD", "content": "高松に住んでいます", "category": "personal_details"}),
    )
    llm.script(
        colleague, Reply.ops({"op": "UPDATE", "target": "m1", "content": "岡山に住んでいます"})
    )
    await ingest(llm_client, user_id, message("高松に住んでいます"))
    (kept,) = decisions(await ingest(llm_client, user_id, message(colleague)))
    assert kept["operation"] == "ADD" and kept["extractor"] == "llm", kept
    assert kept["target_memory_id"] is None
    assert "UPDATE of m1 made an ADD beside it: supersedes score 0.000" in kept["reason"]
    (prompt,) = llm.requests_for(colleague)
    assert "in the language of the message" in prompt.text
    contents = sorted(m["content"] for m in await current_memories(llm_client, user_id))
    assert contents == sorted(["高松に住んでいます", "岡山に住んでいます"])
