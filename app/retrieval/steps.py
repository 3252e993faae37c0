"""Named steps and the one loop that runs them.

A step turns a value (the text the legs search, or the ranked candidates) into the next one
and says what it did. The loop owns the rest: a lever step runs only when the plan has its
lever on (and leaves no trace otherwise), a paper stage switched off reads "off", a step that
does not apply to this query says why, and every step that runs is timed under its own key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from app.ml.cross_encoder import CrossEncoderScorer
from app.ml.embedder import Embedder
from app.retrieval.plan import Lever, RetrievalPlan
from app.retrieval.query_analysis import QueryAnalysis
from app.retrieval.request import SearchRequest
from app.retrieval.specificity import WordRarityCache
from app.retrieval.timing import StageTimer
from app.retrieval.vector_sql import SearchRepository
from app.search_index.client import MemoryIndex

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SearchContext:
    """What every step may read: the request, its plan and analysis, and the stores."""

    request: SearchRequest
    plan: RetrievalPlan
    analysis: QueryAnalysis
    repository: SearchRepository
    index: MemoryIndex
    embedder: Embedder
    cross_encoder: CrossEncoderScorer | None
    # Each user's word statistics (lever `specificity`): the pipeline's, shared by searches.
    word_rarity: WordRarityCache
    # The unit 768D vector of the text the legs searched (set once the legs have run).
    query_vector: np.ndarray | None = None
    # The question as relevance embeds it (as asked; in the first person with lever
    # `first_person`), where the legs embedded another text (lever `speaker_query` took the
    # speakers' names out); None where they embedded this one.
    question_text: str | None = None
    # The multilingual leg's query vector (None: the leg did not run), and whether the query
    # is English (app/retrieval/multilingual_leg.py): which results' relevance it gives.
    multilingual_query_vector: np.ndarray | None = None
    english_query: bool = True
    # The question's parts that the legs searched as well (app/retrieval/parts.py).
    parts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Step(Generic[T]):
    name: str  # its key in the response's `stages`
    run: Callable[[T, SearchContext], Awaitable[tuple[T, str | None]]]  # value, status
    timer: str | None = None  # its key in `stage_durations_ms`
    lever: Lever | None = None  # a lever's step: runs only when the plan has it on
    # A step that serves several levers (declared with their own steps): runs when any is on.
    serves: tuple[Lever, ...] = ()
    switch: str | None = None  # a paper stage the request may switch off (StageSwitches)
    # Why the step does not apply to this value and query (None: it applies).
    skip: Callable[[T, SearchContext], str | None] | None = None
    explains: str | None = None  # the explanation stage it records, if any


async def run_steps(
    steps: Sequence[Step[T]],
    value: T,
    context: SearchContext,
    timer: StageTimer,
    status: dict[str, str],
) -> T:
    for step in steps:
        if step.lever is not None and not context.plan.on(step.lever):
            continue
        if step.serves and not any(context.plan.on(lever) for lever in step.serves):
            continue
        if step.switch is not None and not context.plan.runs(step.switch):
            status[step.name] = "off"
            continue
        if step.skip is not None and (reason := step.skip(value, context)) is not None:
            status[step.name] = reason
            continue
        with timer.stage(step.timer) if step.timer is not None else nullcontext():
            value, said = await step.run(value, context)
        if said is not None:
            status[step.name] = said
    return value


def levers_of(steps: Sequence[Step]) -> tuple[Lever, ...]:
    return tuple(step.lever for step in steps if step.lever is not None)


def explained_by(steps: Sequence[Step]) -> tuple[str, ...]:
    return tuple(step.explains for step in steps if step.explains is not None)
