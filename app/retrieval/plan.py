"""A search's plan: which levers and stages it runs, and every number its steps read, resolved
once per request (app/retrieval/profiles.py) from the request's profile and overrides and the
settings, as graphiti's `SearchConfig` carries each layer's numbers. Steps read the plan,
never the request's raw switches, the profile or the settings.

A lever is declared beside the step that reads it, with the `Tuning` that resolves that
step's numbers, and switched on in a recipe (profiles.py): two places.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import msgspec

from app.config import RetrievalSettings

N = TypeVar("N")


@dataclass(frozen=True, slots=True)
class Lever:
    """A retrieval step beyond the paper's 8 stages, switched per profile and per request.
    Declared beside the step that reads it; its summary documents the API's `levers` field."""

    name: str
    summary: str


class StageSwitches(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-request switches (for ablations and latency-sensitive callers). Also the search
    body's `stages` object: one definition for the API and the pipeline."""

    vector: bool = True
    rescore_768d: bool = True
    bm25: bool = True
    temporal: bool = True
    dedup: bool = True
    rerank: bool = True
    history: bool = True


@dataclass(frozen=True, slots=True)
class Asked:
    """The request's own numbers, over the settings' (None: the settings')."""

    rrf_k: int | None = None
    weight_vector: float | None = None
    weight_bm25: float | None = None
    min_relevance: float | None = None


@dataclass(frozen=True, slots=True)
class Switched:
    """Which levers and paper stages a search runs."""

    levers: Mapping[str, bool]  # every lever, by name: on or off for this request
    switches: StageSwitches

    def on(self, lever: Lever) -> bool:
        """Whether the lever is on; an undeclared lever is an error, not a silent off."""
        return self.levers[lever.name]

    def runs(self, stage: str) -> bool:
        """Whether the request left the paper stage switched on (StageSwitches field)."""
        return bool(getattr(self.switches, stage))


@dataclass(frozen=True, slots=True)
class Basis(Switched):
    """What a step's numbers are resolved from: the levers and switches, the settings and the
    request's own numbers. Only a `Tuning` reads it, once per search."""

    settings: RetrievalSettings
    asked: Asked


@dataclass(frozen=True, slots=True)
class Tuning(Generic[N]):
    """The numbers one step reads, declared beside the step: `resolve` makes them from the
    basis once per search (a lever's numbers where it is on, the request's over the
    settings'); the step reads `plan.numbers(tuning)`."""

    name: str
    resolve: Callable[[Basis], N]


@dataclass(frozen=True, slots=True)
class RetrievalPlan(Switched):
    profile: str
    rrf_k: int  # stage 4's constant: the request's, else the settings'
    tuned: Mapping[str, object]  # each Tuning's numbers, by its name

    def numbers(self, tuning: Tuning[N]) -> N:
        """The step's resolved numbers; an unresolved tuning is an error, not a default."""
        return cast(N, self.tuned[tuning.name])
