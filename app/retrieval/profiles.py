"""Retrieval profiles as recipes: which levers beyond the paper's 8 stages a search uses.

`paper` is SPEC's pipeline exactly. `default` adds the levers that earned their place on the
LoCoMo ablation (docs/benchmarks/locomo.md). A request names a profile and may switch single
levers on or off on top of it; the settings name the profile used when a request names none.

Each lever is declared beside the step that reads it (legs.py, parts.py, fusion.py,
ranking.py, sessions.py, entities.py, relevance_steps.py), with the `Tuning` that resolves
its step's numbers; the `Levers` recipe struct and the API's `LeverOverrides` are made from
those declarations, so a new lever is its step plus, where it earns its place, an entry in a
recipe below. `plan_search` resolves every tuning once per search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, get_args

import msgspec

from app.config import RetrievalSettings
from app.retrieval import disagreement, fusion, legs, parts, ranking, relevance_steps
from app.retrieval.plan import Asked, Basis, Lever, RetrievalPlan, Tuning
from app.retrieval.request import SearchRequest

ProfileName = Literal["paper", "default"]

# Every lever, in the order its step runs.
LEVERS: tuple[Lever, ...] = (*legs.LEVERS, *parts.LEVERS, *fusion.LEVERS, *ranking.LEVERS)
# Every step's numbers, resolved once per search.
TUNINGS: tuple[Tuning, ...] = (*legs.TUNINGS, *fusion.TUNINGS, *ranking.TUNINGS)
assert len({t.name for t in TUNINGS}) == len(TUNINGS), "two tunings of one name"

RECIPES: dict[str, frozenset[Lever]] = {
    "paper": frozenset(),
    # Measured on all ten LoCoMo conversations (docs/benchmarks/locomo.md). Left out, each for
    # a measured reason: neighbours (nothing beside context, whose vector already carries the
    # previous turn), score fusion (RRF is as good at recall@10), entities (no change: the
    # questions rarely name anything but the speakers), feedback (costs recall@10).
    "default": frozenset(
        {
            legs.CONTEXT_VECTOR,
            legs.SENTENCE_VECTOR,
            legs.CONTEXT_BM25,
            ranking.SPEAKER,
            legs.SPEAKER_QUERY,
            # Memories in the user's first person, questions in the second or third
            # (docs/benchmarks/small-users.md).
            legs.FIRST_PERSON,
            ranking.TIME_MENTIONS,
            ranking.SPECIFICITY,
            relevance_steps.RELEVANCE_GUARD,
            # A replaced fact never passes as current (app/retrieval/disagreement.py).
            disagreement.NEWER_FIRST,
            fusion.BALANCED_LEGS,
            # Japanese and other languages the English model cannot read (docs/languages.md);
            # it does not run for an English question of a user who writes English only.
            legs.MULTILINGUAL_VECTOR,
            relevance_steps.LANGUAGE_LEGS,
        }
    ),
}

if TYPE_CHECKING:  # made from LEVERS below; to mypy, plain structs
    Levers = msgspec.Struct
    LeverOverrides = msgspec.Struct
else:
    Levers = msgspec.defstruct(
        "Levers",
        [(lever.name, bool, False) for lever in LEVERS],
        module=__name__,
        namespace={"__doc__": "Every lever, on or off: a profile's recipe."},
        frozen=True,
        forbid_unknown_fields=True,
    )
    LeverOverrides = msgspec.defstruct(
        "LeverOverrides",
        [
            (lever.name, Annotated[bool | None, msgspec.Meta(description=lever.summary)], None)
            for lever in LEVERS
        ],
        module=__name__,
        namespace={
            "__doc__": "A request's changes to its profile's levers; null keeps the "
            "profile's value."
        },
        frozen=True,
        forbid_unknown_fields=True,
    )

PROFILES: dict[str, Levers] = {
    name: Levers(**{lever.name: True for lever in recipe}) for name, recipe in RECIPES.items()
}
assert set(PROFILES) == set(get_args(ProfileName)), "a profile without a recipe, or the reverse"


def lever_changes(overrides: LeverOverrides | None) -> dict[str, bool]:
    """The levers a request sets (null fields keep the profile's value)."""
    if overrides is None:
        return {}
    return {
        name: value
        for name in overrides.__struct_fields__
        if (value := getattr(overrides, name)) is not None
    }


def resolve_levers(profile: str, overrides: LeverOverrides | None = None) -> Levers:
    return msgspec.structs.replace(PROFILES[profile], **lever_changes(overrides))


def plan_search(request: SearchRequest, settings: RetrievalSettings) -> RetrievalPlan:
    """The request's plan: its profile (else the settings') with its lever changes, its
    stage switches, its RRF constant over the settings', and every step's numbers resolved
    from those and the settings."""
    profile = request.profile or settings.retrieval_profile
    levers = msgspec.structs.asdict(msgspec.structs.replace(PROFILES[profile], **request.levers))
    basis = Basis(
        levers=levers,
        switches=request.switches,
        settings=settings,
        asked=Asked(
            rrf_k=request.rrf_k,
            weight_vector=request.weight_vector,
            weight_bm25=request.weight_bm25,
            min_relevance=request.min_relevance,
        ),
    )
    return RetrievalPlan(
        levers=levers,
        switches=request.switches,
        profile=profile,
        rrf_k=request.rrf_k if request.rrf_k is not None else settings.rrf_k,
        tuned={tuning.name: tuning.resolve(basis) for tuning in TUNINGS},
    )
