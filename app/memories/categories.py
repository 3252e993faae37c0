"""The one category rule, at every door: REST (create, batch, PATCH, the list filter), imports,
MCP (whose tools call REST), the ingestion guard (the LLM's answer) and the classifier's choice.

A memory's category is a row of the deployment's `categories` table (seeded with the 15 of
app/vocabulary.py; memories.category is a foreign key to it). A name a caller gives is looked up
in the table in the writer's own transaction, so a row added a moment ago counts at once, in
every process; an unknown name is refused with a 400 naming the field and the known categories.
A memory given no category gets the classifier's choice among the rows, itself held to the
rule, and returned with the memory (or the ingestion decision) like any other field. Nothing
changes a memory's category unless its caller asks: an update that leaves it out keeps it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.categories import existing_categories
from app.errors import InvalidInputError
from app.memories.domain import MemoryDraft
from app.ml.categories import CategoryClassifier


def unknown_category_detail(name: str, known: Iterable[str]) -> str:
    """The one wording of the refusal, for a caller and for the LLM's retry alike."""
    return (
        f"unknown category {name[:64]!r}; expected one of: {', '.join(known)} "
        "(a deployment adds its own as rows of the categories table)"
    )


async def unknown_categories(
    session: AsyncSession, classifier: CategoryClassifier, names: Collection[str]
) -> set[str]:
    """Those of `names` that are not rows of the table now. Where the table and the
    classifier's copy of it disagree about one of them, the copy is read again (and the
    classifier learns the new list): a row added or removed counts without a restart."""
    wanted = set(names)
    existing = await existing_categories(session, wanted)
    copy = set(await classifier.names())
    if wanted & (existing ^ copy):
        classifier.forget()
    return wanted - existing


async def require_categories(
    session: AsyncSession, classifier: CategoryClassifier, given: Sequence[tuple[str, str]]
) -> None:
    """Every (name, field) given names a row; else InvalidInputError naming the field and
    the known categories."""
    unknown = await unknown_categories(session, classifier, {name for name, _ in given})
    for name, field in given:
        if name in unknown:
            detail = unknown_category_detail(name, await classifier.names())
            raise InvalidInputError(detail, field=field)


async def choose_categories(
    session: AsyncSession, classifier: CategoryClassifier, drafts: Sequence[MemoryDraft]
) -> None:
    """The classifier's category for each embedded draft that has none. Its choice obeys the
    rule too: one it learnt from a row removed since sends it back to the table, once."""
    unlabelled = [d for d in drafts if d.category is None]
    if not unlabelled:
        return
    vectors = [d.embedding.full for d in unlabelled if d.embedding is not None]
    texts = [d.content for d in unlabelled]
    chosen = await classifier.classify(vectors, texts)
    if await unknown_categories(session, classifier, chosen):
        chosen = await classifier.classify(vectors, texts)
    for draft, category in zip(unlabelled, chosen, strict=True):
        draft.category = category
