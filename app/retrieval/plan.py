"""A search's plan: which levers and stages it runs and with which numbers, resolved once
per request (app/retrieval/profiles.py) from the request's profile and overrides and the
settings. Steps read the plan, never the request's raw switches or the profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from app.config import RetrievalSettings


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
class RetrievalPlan:
    profile: str
    levers: Mapping[str, bool]  # every lever, by name: on or off for this request
    switches: StageSwitches
    rrf_k: int
    weight_vector: float | None  # the request's fusion weights, over any lever's
    weight_bm25: float | None
    # The numbers of the stages and levers (settings.speaker_boost).
    settings: RetrievalSettings

    def on(self, lever: Lever) -> bool:
        """Whether the lever is on; an undeclared lever is an error, not a silent off."""
        return self.levers[lever.name]

    def runs(self, stage: str) -> bool:
        """Whether the request left the paper stage switched on (StageSwitches field)."""
        return bool(getattr(self.switches, stage))
