"""Retrieval profiles: which levers beyond the paper's 8 stages a search uses.

`paper` is SPEC's pipeline exactly. `default` adds the levers that earned their place on the
LoCoMo ablation (docs/benchmarks/locomo.md). A request names a profile and may switch single
levers on or off on top of it; the settings name the profile used when a request names none.
"""

from __future__ import annotations

from typing import Literal

import msgspec

ProfileName = Literal["paper", "default"]


class Levers(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    # Vector leg: a memory's score is the better of its content's and its contextual text's
    # cosine (app/memories/context.py).
    context_vector: bool = False
    # BM25 leg: the context field is searched too, at settings.bm25_context_boost.
    context_bm25: bool = False
    # BM25 leg: documents with the query's terms close together (a sloppy phrase match, in
    # content and context) score more.
    bm25_proximity: bool = False
    # Speaker-aware: when the query names a speaker of the candidates, that speaker's
    # memories are boosted (app/retrieval/speakers.py).
    speaker: bool = False
    # Both legs search the query without the names of the user's speakers (the speaker lever
    # weighs those instead; app/retrieval/speakers.py).
    speaker_query: bool = False
    # Vector leg: pseudo-relevance feedback (Rocchio) from the best hits
    # (app/retrieval/vector_leg.py).
    feedback: bool = False
    # Memories that mention the entities the query names rank higher
    # (app/retrieval/entities.py).
    entities: bool = False
    # Adjacent turns of a high-ranked memory share a decayed part of its score.
    neighbours: bool = False
    # "When" questions prefer memories that name a time; the temporal boost uses the named
    # time where there is one (app/retrieval/time_mentions.py).
    time_mentions: bool = False
    # Fusion weighs the two legs equally (0.5 / 0.5) instead of the settings' 70/30: with
    # context on both legs, BM25 is nearly as strong alone as the vector leg.
    balanced_legs: bool = False
    # Fusion weights by query type: a query naming an entity or a number (after the speakers'
    # names are gone) weighs BM25 0.7 and the vector 0.3 (app/retrieval/fusion.py).
    typed_weights: bool = False
    # Fusion by min-max normalised scores instead of RRF ranks (app/retrieval/fusion.py).
    score_fusion: bool = False


PROFILES: dict[str, Levers] = {
    "paper": Levers(),
    # Measured on all ten LoCoMo conversations (docs/benchmarks/locomo.md). Left out, each for
    # a measured reason: neighbours (nothing beside context, whose vector already carries the
    # previous turn), score fusion (RRF is as good at recall@10), entities (no change: the
    # questions rarely name anything but the speakers), feedback (costs recall@10).
    "default": Levers(
        context_vector=True,
        context_bm25=True,
        speaker=True,
        speaker_query=True,
        time_mentions=True,
        balanced_legs=True,
    ),
}


class LeverOverrides(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A request's changes to its profile's levers; null keeps the profile's value."""

    context_vector: bool | None = None
    context_bm25: bool | None = None
    bm25_proximity: bool | None = None
    speaker: bool | None = None
    speaker_query: bool | None = None
    entities: bool | None = None
    feedback: bool | None = None
    neighbours: bool | None = None
    score_fusion: bool | None = None
    balanced_legs: bool | None = None
    typed_weights: bool | None = None
    time_mentions: bool | None = None


def resolve_levers(profile: str, overrides: LeverOverrides | None = None) -> Levers:
    base = PROFILES[profile]
    if overrides is None:
        return base
    changes = {
        name: value
        for name in overrides.__struct_fields__
        if (value := getattr(overrides, name)) is not None
    }
    return msgspec.structs.replace(base, **changes)
