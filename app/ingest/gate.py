"""The LLM gate: ask the LLM only where its answer can differ from the extractor without one.

An LLM decision is worth its cost when the message may update, contradict or repeat something
the user already has: that needs a current memory close to it. When no candidate is at least
`threshold` cosine-similar (768D) to the message, the LLM could only ADD (or say NONE), and the
deterministic extractor decides instead, without a call. The verdict and the similarity it
judged go into every audit row (`llm_gate`, `gate_similarity`).

The threshold comes from bench/llm_gate.py: pairs of an earlier memory and a later message
that updates it (bench/data/update_pairs.tsv) against the share of LoCoMo turns that skip the
call (docs/benchmarks/llm-gate.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ingest.domain import Candidate


@dataclass(frozen=True, slots=True)
class GateVerdict:
    call: bool
    similarity: float | None  # the nearest current memory's cosine; None: the user has none

    @property
    def label(self) -> str:
        return "call" if self.call else "skip"


def llm_gate(candidates: list[Candidate], threshold: float) -> GateVerdict:
    """Call the LLM only when some current memory is at least `threshold`-similar (always when
    the threshold is 0 or less: the gate is open)."""
    nearest = max((c.similarity for c in candidates), default=None)
    close = nearest is not None and nearest >= threshold
    return GateVerdict(call=threshold <= 0 or close, similarity=nearest)
