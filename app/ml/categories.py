"""Pick a memory's category as the nearest of the category descriptions by embedding cosine."""

from __future__ import annotations

import asyncio

import numpy as np

from app.config import CATEGORIES
from app.ml.embedder import Embedder

CATEGORY_DESCRIPTIONS: dict[str, str] = {
    "personal_details": "Personal details: name, age, birthday, where the person lives, family "
    "background, identity, nationality.",
    "professional": "Work and career: job, employer, role, colleagues, projects at work, "
    "promotions, business.",
    "health": "Health: illness, medical conditions, injuries, medication, doctors, fitness, sleep.",
    "relationships": "Relationships: partner, spouse, friends, children, parents, siblings, "
    "dating, family members.",
    "preferences": "Preferences: likes and dislikes, favourite things, tastes, choices the "
    "person prefers.",
    "hobbies": "Hobbies and leisure: sports, games, music, painting, reading, crafts, pastimes.",
    "goals": "Goals and plans: ambitions, intentions, things the person wants to achieve or do "
    "in the future.",
    "financial": "Money: income, salary, savings, debt, budget, investments, purchases, prices.",
    "educational": "Education: school, university, courses, degrees, studying, exams, learning.",
    "travel": "Travel: trips, vacations, flights, visiting cities and countries, destinations.",
    "emotional": "Emotions and feelings: happy, sad, stressed, anxious, excited, lonely, "
    "proud, grief.",
    "technical_skills": "Technical skills: programming languages, software, tools, technologies "
    "the person knows.",
    "dietary": "Diet and food: vegetarian, vegan, allergies, food restrictions, meals, cooking, "
    "eating habits.",
    "behavioral_patterns": "Habits and routines: what the person usually does, daily "
    "schedule, recurring behaviour.",
    "communication_style": "Communication style: how the person likes to be addressed, tone, "
    "language, brevity, formality.",
}
assert set(CATEGORY_DESCRIPTIONS) == set(CATEGORIES)


class CategoryClassifier:
    """Nearest-description classifier over the 15 categories."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._names = list(CATEGORY_DESCRIPTIONS)
        self._matrix: np.ndarray | None = None
        self._lock = asyncio.Lock()

    async def _centroids(self) -> np.ndarray:
        # Locked: concurrent first callers (several worker loops) embed the descriptions once.
        async with self._lock:
            if self._matrix is None:
                embeddings = await self._embedder.embed(list(CATEGORY_DESCRIPTIONS.values()))
                self._matrix = np.stack([e.full for e in embeddings])
        return self._matrix

    async def classify(self, vectors: list[np.ndarray]) -> list[str]:
        """Category for each unit 768D vector."""
        if not vectors:
            return []
        scores = np.stack(vectors) @ (await self._centroids()).T
        return [self._names[i] for i in scores.argmax(axis=1)]
