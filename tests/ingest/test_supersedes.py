"""Updates without an LLM by the learned supersedes model (app/ingest/supersedes.py): its
precision and recall on the held-out split, computed here from the data and the shipped weights
with the service's own embedder; and through the real HTTP API (no LLM configured): an
everyday update becomes a new version of the fact it replaces, an addition that looks like an
update stays an ADD, and a message of several facts updates one and keeps the others."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.config import IngestSettings
from app.ingest.supersedes import SentenceView, find_superseded, shipped_model
from app.ingest.supersedes_en import about_someone_else
from app.ml.scheduling.work import Work, WorkClass
from bench.corrections import shown_candidate
from bench.supersedes import HELDOUT2_PATH, HELDOUT_PATH, heldout_scores
from tests.conftest import InProcessApi
from tests.ingest.helpers import current_memories, decisions, ingest, message

# Measured in docs/benchmarks/supersedes.md ("A fresh held-out split"), at the shipped 0.73:
# heldout2.jsonl (written before the model was changed for it) with 4 fillers 0.975 (39/40) /
# 0.780 (39/50), with none (a user of one or two memories) 0.977 (42/43) / 0.840 (42/50);
# heldout.jsonl (read while the model was built) 0.980 (50/51) / 0.781 (50/64). Each floor sits
# one case below its measured figure (one more wrong UPDATE, one more missed), for float
# differences between embedder builds: (split, fillers, precision floor, recall floor).
HELDOUT_FLOORS = [
    (HELDOUT2_PATH, 4, 0.95, 0.76),  # 39/41 = 0.951, 38/50
    (HELDOUT2_PATH, 0, 0.95, 0.82),  # 42/44 = 0.955, 41/50
    (HELDOUT_PATH, 4, 0.96, 0.76),  # 50/52 = 0.962, 49/64 = 0.766
]


async def history(client: httpx.AsyncClient, user_id: str, memory_id: str) -> list[dict]:
    response = await client.get(f"/v1/users/{user_id}/memories/{memory_id}/history")
    assert response.status_code == 200, response.text
    return response.json()["versions"]


def test_the_setting_defaults_to_the_shipped_threshold() -> None:
    assert IngestSettings().ingest_supersedes_threshold == shipped_model().threshold


@pytest.mark.parametrize(
    ("split", "fillers", "precision", "recall"),
    HELDOUT_FLOORS,
    ids=[f"{p.stem}-{n}-fillers" for p, n, _, _ in HELDOUT_FLOORS],
)
async def test_heldout_precision_and_recall_reach_the_documented_figures(
    inprocess_api: InProcessApi, split: Path, fillers: int, precision: float, recall: float
) -> None:
    embedder = inprocess_api.app.state.runtime.embedder

    async def embed(texts: list[str]) -> dict[str, np.ndarray]:
        embeddings = await embedder.embed(texts, Work(WorkClass.BULK))
        return {t: e.full for t, e in zip(texts, embeddings, strict=True)}

    shown, scores = await heldout_scores(embed, shipped_model(), split, fillers)
    assert len(shown) >= 100 and scores.expected >= 50
    assert scores.precision >= precision, scores.line()
    assert scores.recall >= recall, scores.line()


@pytest.mark.parametrize(
    ("memory", "sentence", "someone_else"),
    [
        ("I work as a translator", "My husband got a job as an electrician", "husband"),
        ("My aunt lives in Tromsø", "My uncle moved to Bodø", "uncle"),
        ("I live in Cádiz", "So, our neighbours sold up and moved to Seville", "neighbours"),
        ("I go to a pottery class", "She quit her pottery class", "she"),
        # he/she/they may be the person the memory names, or a clause's, not the sentence's
        ("My sister lives in Ghent", "She moved to Antwerp", None),
        ("I live in Leeds", "Tove left her job, she's at a bakery now", None),
        # the speaker in it, a person the memory names (or a synonym), a role acting on the
        # user's facts, or a memory that may be about anyone: not ruled out
        ("I live in Cádiz", "My partner and I moved to Seville", None),
        ("My mum lives in Dundee", "My mother moved to Perth", None),
        ("My physio is on Tuesdays", "My physio moved our sessions to Thursdays", None),
        ("I take 5 mg of ramipril", "My doctor doubled the ramipril dose", None),
        ("Signe lives in Odense", "My sister moved to Aarhus", None),
    ],
)
def test_another_persons_fact_is_not_judged(
    memory: str, sentence: str, someone_else: str | None
) -> None:
    assert about_someone_else(memory, sentence) == someone_else


def test_only_a_memory_of_one_sentence_by_the_same_speaker_can_be_superseded() -> None:
    """The same pair that is an UPDATE of a one-sentence memory is nothing for a memory of two
    sentences (its other fact would be lost) or for another speaker's memory."""
    model = shipped_model()
    text = "We sold the sailing dinghy and bought a kayak"

    def judged(content: str, speaker: str | None) -> bool:
        memory = shown_candidate(1, content)
        memory = type(memory)(**{**_fields(memory), "speaker": speaker})
        view = SentenceView(text, {memory.memory_id: 0.7}, 0.4)
        found = find_superseded([view], [memory], {memory.memory_id: -0.2}, 0.0, model, None)
        return found is not None and found.target.memory_id == memory.memory_id

    assert judged("I own a sailing dinghy", None)
    assert not judged("I own a sailing dinghy. I keep it at the lake.", None)
    assert not judged("I own a sailing dinghy", "Ana")


def _fields(candidate: object) -> dict[str, object]:
    return {name: getattr(candidate, name) for name in candidate.__slots__}  # type: ignore[attr-defined]


async def test_an_everyday_update_becomes_a_new_version_of_the_fact_it_replaces(
    client: httpx.AsyncClient, user_id: str
) -> None:
    (car,) = decisions(await ingest(client, user_id, message("I drive a grey Mazda 3")))
    (job,) = decisions(await ingest(client, user_id, message("I work as a pharmacist")))
    assert car["operation"] == job["operation"] == "ADD"
    job_done = await ingest(
        client, user_id, message("We sold the Mazda, so I ride an electric scooter these days")
    )
    (update,) = decisions(job_done)
    assert update["operation"] == "UPDATE" and update["extractor"] == "deterministic"
    assert update["target_memory_id"] == car["memory_id"]
    assert update["reason"].startswith("supersedes without an LLM: score 0.")
    versions = await history(client, user_id, update["memory_id"])
    assert [v["content"] for v in versions] == [
        "I drive a grey Mazda 3",
        "We sold the Mazda, so I ride an electric scooter these days",
    ]
    assert versions[1]["replaces_id"] == car["memory_id"]
    assert [v["is_current"] for v in versions] == [False, True]
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == [
        "I work as a pharmacist",
        "We sold the Mazda, so I ride an electric scooter these days",
    ]


@pytest.mark.parametrize(
    ("earlier", "addition"),
    [
        ("I have a cat named Pixel", "We also have a border collie"),
        ("I work as a pharmacist", "Busy afternoon at the pharmacy, flu season is here"),
        ("I live in a flat in Dortmund", "My brother moved from Essen to Bochum"),
        ("My flight to Oslo is on the 4th", "The flight back from Oslo is on the 12th"),
    ],
)
async def test_an_addition_that_looks_like_an_update_stays_an_add(
    client: httpx.AsyncClient, user_id: str, earlier: str, addition: str
) -> None:
    (first,) = decisions(await ingest(client, user_id, message(earlier)))
    await ingest(client, user_id, message("I live in Rotterdam"))
    (added,) = decisions(await ingest(client, user_id, message(addition)))
    # Never an UPDATE: an ADD, or NONE where the fact model misses the fact ("The flight
    # back from Oslo is on the 12th": no subject of the user's, a date; docs/benchmarks/facts.md).
    assert added["operation"] in ("ADD", "NONE") and added["target_memory_id"] is None
    assert len(await history(client, user_id, first["memory_id"])) == 1
    kept = [addition] if added["operation"] == "ADD" else []
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == sorted([earlier, "I live in Rotterdam", *kept])


async def test_a_message_of_several_facts_updates_one_and_keeps_the_others(
    client: httpx.AsyncClient, user_id: str
) -> None:
    (cello,) = decisions(await ingest(client, user_id, message("I play cello in a string quartet")))
    await ingest(client, user_id, message("My favourite food is ramen"))
    text = (
        "I left the quartet and play in the city orchestra now. My niece Clara was born on Friday."
    )
    update, addition = decisions(await ingest(client, user_id, message(text)))
    assert update["operation"] == "UPDATE" and update["target_memory_id"] == cello["memory_id"]
    assert update["content"] == "I left the quartet and play in the city orchestra now."
    assert addition["operation"] == "ADD" and addition["target_memory_id"] is None
    assert addition["content"] == "My niece Clara was born on Friday."
    contents = sorted(m["content"] for m in await current_memories(client, user_id))
    assert contents == sorted(
        [
            "I left the quartet and play in the city orchestra now.",
            "My niece Clara was born on Friday.",
            "My favourite food is ramen",
        ]
    )
    assert uuid.UUID(update["memory_id"]) != uuid.UUID(cello["memory_id"])
