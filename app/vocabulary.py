"""The domain's names and bounds: what a memory's fields may hold, not how a deployment runs.

The bottom of the layering: it imports nothing from the app, and everything may import it
(settings check their limits against the bounds here; the wire schemas publish them).
"""

from __future__ import annotations

from typing import Literal, get_args

# The paper's 15 categories: the seed rows of the `categories` table. They are examples, not
# the list: a deployment may add rows there, and memories.category is a foreign key to that
# table (app/memories/categories.py holds the rule every door applies).
SEED_CATEGORIES: tuple[str, ...] = (
    "personal_details",
    "professional",
    "health",
    "relationships",
    "preferences",
    "hobbies",
    "goals",
    "financial",
    "educational",
    "travel",
    "emotional",
    "technical_skills",
    "dietary",
    "behavioral_patterns",
    "communication_style",
)

# USER memories persist across sessions; CONTEXT ones belong to one session.
Scope = Literal["USER", "CONTEXT"]
SCOPES: tuple[str, ...] = get_args(Scope)

# The languages a memory's and a query's text is told apart among (ISO 639-1), by
# app/ml/language.py. A client may name any two-letter code on a memory; detection chooses among
# these only: each one more is one more way for a short English turn to be read as another
# language (docs/languages.md has the figures).
LANGUAGES: tuple[str, ...] = (
    "en", "ja", "zh", "ko", "es", "fr", "de", "pt", "it", "nl", "ru", "vi", "id", "tr", "pl", "sv",
)  # fmt: skip
# Scripts written without spaces between words: their BM25 fields are not the default one
# (app/search_index/documents.py).
CJK_LANGUAGES: tuple[str, ...] = ("ja", "zh", "ko")
# Written in another script than the Latin one: the English embedder cannot read them, so the
# multilingual vector judges them (app/retrieval/multilingual_leg.py). Latin-script languages
# are left out: the detector takes a short English memory for Dutch or Tagalog now and then,
# and an English user's search must stay what it was.
NON_LATIN_LANGUAGES: tuple[str, ...] = ("ja", "ko", "ru", "zh")

# What ingestion's extractor may decide for a fact (SPEC section 3).
OPERATIONS: tuple[str, ...] = ("ADD", "UPDATE", "DELETE", "NONE")

# The stored vectors: the model's output zero-padded to 768D, and its re-normalised 256D prefix.
EMBEDDING_DIM = 768
COARSE_DIM = 256
# The multilingual vector beside them (app/ml/multilingual.py: multilingual USE v3).
MULTILINGUAL_DIM = 512

# Published bounds (the OpenAPI document shows them): a setting may lower one, never raise it.
MAX_CONTENT_CHARS = 8_000
MAX_BATCH_ITEMS = 100
MAX_TOP_K = 100
MAX_METADATA_DEPTH = 32
# An idempotency key (the Idempotency-Key header, a message's idempotency_key): a UUID fits
# many times over; a longer one is a mistake (a whole body sent as the key).
MAX_IDEMPOTENCY_KEY_CHARS = 256
# Instants outside these years are typos (year 1, year 9999), not facts: they overflow date
# arithmetic (relative phrases, time windows) long before they mean anything.
EARLIEST_YEAR, LATEST_YEAR = 1000, 2999

# The types of the named things memories are about (issue 43, app/ml/ner.py, 0039's CHECK).
ENTITY_TYPES = (
    "person",
    "place",
    "organisation",
    "product",
    "title",
    "event",
    "group",
    "language",
)
