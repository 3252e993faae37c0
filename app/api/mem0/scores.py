"""mem0's `score` and `threshold` on a scale its users' habits fit.

Here a result's relevance is the cosine of the query to the memory with all-mpnet-base-v2
(app/retrieval/relevance.py): a question and the statement that answers it score lower than
mem0 users are used to (on LoCoMo the evidence turns' median is 0.47, their 5th percentile
0.23; unrelated memories 0-0.13), so `threshold=0.5`, a common mem0 value, left out most right
answers. mem0's client sees a rescaled relevance instead: `score` is its square root, and
`threshold` asks for the relevance that square root reaches (threshold squared). The map is
monotone and keeps 0 and 1, so the order is the relevance's and a threshold read off the
scores means what it says: evidence turns score about 0.48 (5th percentile) to 0.69 (median)
here, unrelated memories at most 0.36. docs/mem0.md gives what each threshold costs.
"""

from __future__ import annotations

import math


def score_of(relevance: float) -> float:
    """A relevance (0-1) as the score mem0's client shows."""
    return round(math.sqrt(min(1.0, max(0.0, relevance))), 4)


def relevance_floor(threshold: float) -> float:
    """The relevance a mem0 `threshold` asks for: the one whose score is that threshold."""
    return round(min(1.0, max(0.0, threshold)) ** 2, 6)
