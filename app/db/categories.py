"""The deployment's categories, as the `categories` table lists them."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Category
from app.ml.categories import CategoryDefinition, DefinitionsLoader


def category_loader(sessionmaker: async_sessionmaker[AsyncSession]) -> DefinitionsLoader:
    """A loader the classifier calls when its copy is stale: every row, in name order."""

    async def load() -> list[CategoryDefinition]:
        async with sessionmaker() as session:
            rows = await session.scalars(select(Category).order_by(Category.name))
            return [CategoryDefinition(r.name, r.description, tuple(r.examples)) for r in rows]

    return load


async def existing_categories(session: AsyncSession, names: Collection[str]) -> set[str]:
    """Those of `names` that are rows now, read in the caller's transaction (the one that
    writes the memories, whose foreign key will hold them to the same rows)."""
    if not names:
        return set()
    found = await session.scalars(select(Category.name).where(Category.name.in_(list(names))))
    return set(found)
