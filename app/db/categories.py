"""The deployment's categories, as the `categories` table lists them."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Category
from app.ml.categories import CategoryDefinition, DefinitionsLoader


def category_loader(sessionmaker: async_sessionmaker[AsyncSession]) -> DefinitionsLoader:
    """A loader the classifier calls once: every row, in name order."""

    async def load() -> list[CategoryDefinition]:
        async with sessionmaker() as session:
            rows = await session.scalars(select(Category).order_by(Category.name))
            return [CategoryDefinition(r.name, r.description, tuple(r.examples)) for r in rows]

    return load
